"""The fleet's shared secret: it signs what one collector tells the others (tokens, callers),
so that someone who can publish to the broker cannot mint a token or speak for a user."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FleetKey"]

_MIN_BYTES = 32


@dataclass(frozen=True, slots=True, repr=False)
class FleetKey:
    """An HMAC-SHA256 key (never shown: ``repr`` says nothing of it)."""

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) < _MIN_BYTES:
            raise ValueError(
                f"a fleet key needs at least {_MIN_BYTES} bytes: make one with "
                "`openssl rand -hex 32 > fleet.key` and give every collector the same file"
            )

    def __repr__(self) -> str:
        return "FleetKey(…)"

    @classmethod
    def from_file(cls, path: Path) -> FleetKey:
        """The key in ``path`` (its bytes, surrounding white space dropped)."""
        try:
            return cls(path.read_bytes().strip())
        except OSError as exc:
            raise ValueError(f"cannot read the fleet key {path}: {exc.strerror}") from None

    def sign(self, *parts: str | bytes) -> str:
        """The signature of ``parts`` (joined unambiguously)."""
        mac = hmac.new(self.secret, digestmod=hashlib.sha256)
        for part in parts:
            raw = part.encode() if isinstance(part, str) else part
            mac.update(len(raw).to_bytes(8, "big") + raw)
        return mac.hexdigest()

    def verify(self, signature: str, *parts: str | bytes) -> bool:
        return hmac.compare_digest(signature, self.sign(*parts))
