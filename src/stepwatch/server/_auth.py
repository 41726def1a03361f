"""The auth seam: one dependency every route passes through, open or bearer-token."""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass

from fastapi import Request

from ._errors import ApiError

__all__ = ["Auth", "is_loopback"]

#: Paths that carry no data: the liveness probe and the page shell (it asks for the token).
PUBLIC_PATHS = frozenset({"/healthz", "/"})


@dataclass(frozen=True, slots=True)
class Auth:
    """Bearer-token check; ``token=None`` leaves the API open (meant for loopback binds)."""

    token: str | None = None
    public_paths: frozenset[str] = PUBLIC_PATHS

    def __call__(self, request: Request) -> None:
        if self.token is None or request.url.path in self.public_paths:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise self._refuse("missing bearer token: send 'Authorization: Bearer <token>'")
        if not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise self._refuse("wrong bearer token")

    @staticmethod
    def _refuse(message: str) -> ApiError:
        return ApiError(401, message, headers={"WWW-Authenticate": "Bearer"})


def is_loopback(host: str) -> bool:
    """True when binding ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: we do not resolve it, so we cannot vouch for it
