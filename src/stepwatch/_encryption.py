"""The encryption key: one secret serves the store and every spool, each through a subkey.

Why one secret with derived subkeys: the collector and the producers are configured with the
same file, yet the store's key and the spool's key are independent (HKDF with a purpose each),
so nothing learned about one cipher's use says anything about the other.
"""

from __future__ import annotations

import binascii
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ENV_KEY",
    "ENV_KEY_FILE",
    "EncryptionError",
    "EncryptionKey",
    "create_key_file",
    "missing",
    "read_key_file",
    "resolve_key",
]

ENV_KEY_FILE = "STEPWATCH_ENCRYPTION_KEY_FILE"
ENV_KEY = "STEPWATCH_ENCRYPTION_KEY"
KEY_BYTES = 32
INSTALL_HINT = "pip install 'stepwatch[encryption]'"


class EncryptionError(ValueError):
    """A key that cannot be used (unreadable, malformed, the wrong one) or a missing cipher."""


@dataclass(frozen=True, slots=True)
class EncryptionKey:
    """32 secret bytes and where they came from (named in errors; the bytes never are)."""

    secret: bytes = field(repr=False)
    origin: str

    def derive(self, purpose: str) -> bytes:
        """The 32-byte subkey for one use ("store", "spool"), independent of the others."""
        try:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF
        except ImportError:
            raise missing("cryptography") from None
        info = f"stepwatch {purpose} v1".encode()
        return HKDF(hashes.SHA256(), KEY_BYTES, None, info).derive(self.secret)


def missing(package: str) -> EncryptionError:
    """What to say when a package only encryption needs is not installed."""
    return EncryptionError(f"encryption needs the {package} package: {INSTALL_HINT}")


def parse_key(text: str, origin: str) -> EncryptionKey:
    """A key written as 64 hexadecimal digits (what ``create_key_file`` writes)."""
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        secret = b""
    if len(secret) != KEY_BYTES:
        raise EncryptionError(
            f"{origin}: an encryption key is {KEY_BYTES * 2} hexadecimal digits "
            "(make one with `stepwatch key create FILE`)"
        )
    return EncryptionKey(secret, origin)


def read_key_file(path: str | os.PathLike[str]) -> EncryptionKey:
    """The key in ``path``; EncryptionError when it cannot be read or is not a key."""
    origin = f"key file {path}"
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a key"
        raise EncryptionError(f"{origin}: {why.lower()}") from None
    return parse_key(text, origin)


def resolve_key(
    path: str | os.PathLike[str] | None, environ: Mapping[str, str]
) -> EncryptionKey | None:
    """The key of a process: ``path``, else $STEPWATCH_ENCRYPTION_KEY_FILE, else the key in
    $STEPWATCH_ENCRYPTION_KEY; None when none is given (no encryption)."""
    chosen = path or environ.get(ENV_KEY_FILE)
    if chosen:
        return read_key_file(chosen)
    if text := environ.get(ENV_KEY):
        return parse_key(text, ENV_KEY)
    return None


def create_key_file(path: str | os.PathLike[str]) -> Path:
    """Write a new random key to ``path``, readable by its owner only; never over a file."""
    path = Path(path)
    text = binascii.hexlify(secrets.token_bytes(KEY_BYTES)) + b"\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise EncryptionError(f"{path} exists: a key is never overwritten") from None
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower()
        raise EncryptionError(f"cannot create {path}: {why}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return path
