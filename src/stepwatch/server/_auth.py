"""The auth seam: every route declares what it needs, and one guard says who is asking.

A route without a declaration cannot be served (``include`` refuses its router), so a new
route is closed until someone decides who may call it.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from ..auth import ANONYMOUS, Identity, Permission, TokenBook, TokenRefused, token_digest
from ._errors import ApiError
from ._sessions import SESSION_COOKIE, SessionBook

__all__ = [
    "PUBLIC",
    "Admin",
    "Guard",
    "Ingester",
    "Need",
    "Operator",
    "Reader",
    "SignedIn",
    "include",
    "is_loopback",
    "need",
]

#: Header a signed-in page sends with every state-changing request (the session's secret).
CSRF_HEADER = "x-csrf-token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass
class Guard:
    """Says who is asking: a bearer token, or a session cookie; everyone when auth is off."""

    tokens: TokenBook | None
    sessions: SessionBook = field(default_factory=SessionBook)

    @property
    def enabled(self) -> bool:
        return self.tokens is not None

    def identify(self, request: Request) -> Identity:
        """The caller's identity; 401 when auth is on and the request proves none."""
        if self.tokens is None:
            return ANONYMOUS
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and given.strip():
            return self._verify(given.strip())
        sid = request.cookies.get(SESSION_COOKIE)
        session = self.sessions.get(sid) if sid else None
        if session is None:
            raise _refuse("missing bearer token: send 'Authorization: Bearer <token>', or sign in")
        if request.method not in _SAFE_METHODS:
            sent = request.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
                raise ApiError(403, f"missing or wrong {CSRF_HEADER} header for this session")
        return self._by_hash(session.token_hash)

    def _verify(self, secret: str) -> Identity:
        assert self.tokens is not None
        try:
            return self.tokens.verify(secret)
        except TokenRefused as exc:
            raise _refuse(str(exc)) from None

    def _by_hash(self, token_hash: str) -> Identity:
        assert self.tokens is not None
        try:
            return self.tokens.verify_hash(token_hash)
        except TokenRefused as exc:
            raise _refuse(f"session ended: {exc}") from None

    def sign_in(self, secret: str) -> tuple[Identity, str, str]:
        """Check a token and open a session: (identity, session id, CSRF secret)."""
        identity = self._verify(secret)
        sid, session = self.sessions.open(token_digest(secret))
        return identity, sid, session.csrf


def _refuse(message: str) -> ApiError:
    return ApiError(401, message, headers={"WWW-Authenticate": "Bearer"})


class Need:
    """A route's declaration: the permissions any one of which lets a caller in."""

    def __init__(self, *permissions: Permission) -> None:
        self.permissions = frozenset(permissions)

    def __call__(self, request: Request) -> Identity:
        guard: Guard = request.app.state.guard
        who = guard.identify(request)
        if not who.can_any(self.permissions):
            wanted = " or ".join(sorted(self.permissions))
            raise ApiError(403, f"{who.name} has role {who.role}: this needs {wanted} permission")
        return who


class _Public:
    """The declaration of a route anyone may call: it carries no data."""

    def __call__(self) -> None:
        return None


PUBLIC = Depends(_Public())


def need(*permissions: Permission) -> Any:
    """A route's ``dependencies=[need(...)]`` entry when the handler does not ask who called."""
    return Depends(Need(*permissions))


Reader = Annotated[Identity, Depends(Need(Permission.READ))]
Ingester = Annotated[Identity, Depends(Need(Permission.WRITE))]
Operator = Annotated[Identity, Depends(Need(Permission.OPERATE))]
Admin = Annotated[Identity, Depends(Need(Permission.ADMIN))]
#: Any valid identity (whoever signs in may ask who they are).
SignedIn = Annotated[Identity, Depends(Need(*Permission))]


def _declared(dependant: Dependant) -> bool:
    return isinstance(dependant.call, (Need, _Public)) or any(
        _declared(d) for d in dependant.dependencies
    )


def _declares(dependencies: Sequence[Any]) -> bool:
    return any(isinstance(d.dependency, (Need, _Public)) for d in dependencies)


def include(app: FastAPI, router: APIRouter) -> None:
    """``app.include_router``, refusing a router with a route that does not say who may call it."""
    missing = [
        f"{sorted(r.methods or ())} {r.path}"
        for r in router.routes
        if isinstance(r, APIRoute)
        and not (_declares(router.dependencies) or _declares(r.dependencies))
        and not _declared(r.dependant)
    ]
    if missing:
        raise RuntimeError(f"routes without an access declaration: {', '.join(missing)}")
    app.include_router(router)


def is_loopback(host: str) -> bool:
    """True when binding ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: we do not resolve it, so we cannot vouch for it
