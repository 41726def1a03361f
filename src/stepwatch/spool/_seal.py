"""Sealed spool records: AES-GCM, so a copied spool shows no metric, label or log line.

A sealed record is ``b"SWE1" | writer id (16) | nonce (12) | ciphertext and tag``. Each writer
draws a random id and seals with its own subkey of the spool key, so random nonces never come
near the limit of one key's use however many producers share the key file; the header is
authenticated with the payload. Plain records (written before encryption was turned on) still
read with a key: they hold nothing a key could protect.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from .._encryption import EncryptionKey, missing

__all__ = ["SEALED", "Sealer", "SpoolKeyError", "is_sealed", "unseal"]

SEALED = b"SWE1"
_ID_BYTES, _NONCE_BYTES = 16, 12
_HEADER = len(SEALED) + _ID_BYTES + _NONCE_BYTES
KEY_HINT = "set STEPWATCH_ENCRYPTION_KEY_FILE (or --encryption-key-file) to its key file"


class SpoolKeyError(ValueError):
    """A spool (or run file) that cannot be read with the key given: none, or another one."""


def is_sealed(data: bytes) -> bool:
    """Whether ``data`` is a sealed record rather than a plain one."""
    return data[: len(SEALED)] == SEALED


class Sealer:
    """Seals the records of one writer and opens those of any writer under the same key."""

    def __init__(self, key: EncryptionKey) -> None:
        try:
            from cryptography.exceptions import InvalidTag
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:
            raise missing("cryptography") from None
        self.key = key
        self._aesgcm, self._invalid = AESGCM, InvalidTag
        self._writer = secrets.token_bytes(_ID_BYTES)
        self._ciphers: dict[bytes, Any] = {}

    def _cipher(self, writer: bytes) -> Any:
        if (cipher := self._ciphers.get(writer)) is None:
            subkey = self.key.derive(f"spool {writer.hex()}")
            cipher = self._ciphers[writer] = self._aesgcm(subkey)
        return cipher

    def seal(self, payload: bytes) -> bytes:
        """``payload`` encrypted and authenticated under a fresh nonce."""
        header = SEALED + self._writer + secrets.token_bytes(_NONCE_BYTES)
        return header + self._cipher(self._writer).encrypt(header[-_NONCE_BYTES:], payload, header)

    def open(self, record: bytes) -> bytes | None:
        """The payload of a sealed record; None when the key is not its key or it was altered."""
        header = record[:_HEADER]
        writer = header[len(SEALED) : len(SEALED) + _ID_BYTES]
        try:
            return bytes(
                self._cipher(writer).decrypt(header[-_NONCE_BYTES:], record[_HEADER:], header)
            )
        except self._invalid:
            return None


def unseal(data: bytes, sealer: Sealer | None, where: Path) -> bytes:
    """A record or run file as written: opened when sealed, else as it is.

    SpoolKeyError (saying what to do) when it is sealed and there is no key or not its key.
    """
    if not is_sealed(data):
        return data
    if sealer is None:
        raise SpoolKeyError(f"spool {where} is encrypted: {KEY_HINT}")
    opened = sealer.open(data)
    if opened is None:
        origin = sealer.key.origin
        raise SpoolKeyError(
            f"spool {where} was sealed with another key than the {origin} (or altered since)"
        )
    return opened
