"""The auth seam: every route declares what it needs, and one guard says who is asking.

A route without a declaration cannot be served (``include`` refuses its router), so a new
route is closed until someone decides who may call it.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from ..auth import ANONYMOUS, Identity, Permission, TokenBook, TokenRefused, token_digest
from ._errors import ApiError
from ._sessions import SESSION_COOKIE, SessionBook

if TYPE_CHECKING:
    from ..fleet import FleetKey

__all__ = [
    "CALLER_HEADER",
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
#: Another collector of the fleet vouching for the caller of a request it passed on.
CALLER_HEADER = "x-stepwatch-caller"
#: How long such a word holds (the collectors' clocks may differ by this much).
CALLER_TTL_S = 60.0
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass
class Guard:
    """Says who is asking: a bearer token, or a session cookie; everyone when auth is off."""

    tokens: TokenBook | None
    sessions: SessionBook = field(default_factory=SessionBook)
    #: Vouches for callers another collector of the fleet identified (None: no fleet).
    fleet_key: FleetKey | None = None
    clock: Callable[[], float] = time.time

    @property
    def enabled(self) -> bool:
        return self.tokens is not None

    def identify(self, request: Request) -> Identity:
        """The caller's identity; 401 when auth is on and the request proves none."""
        if self.tokens is None:
            return ANONYMOUS
        vouched = request.headers.get(CALLER_HEADER)
        if vouched is not None and self.fleet_key is not None:
            return self._by_hash(self._vouched(request, vouched))
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

    def caller(self, request: Request) -> str | None:
        """What another collector is told of this request's caller: the caller's token hash,
        the time and a signature of both with the request (None with auth off). The caller is
        identified here first (401, 403 for a session's missing CSRF header)."""
        if self.tokens is None or self.fleet_key is None:
            return None
        self.identify(request)
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and given.strip():
            token_hash = token_digest(given.strip())
        else:
            session = self.sessions.get(request.cookies.get(SESSION_COOKIE, ""))
            assert session is not None  # identify() refused a request without one
            token_hash = session.token_hash
        now = f"{self.clock():.3f}"
        signature = self.fleet_key.sign(*_vouched_for(token_hash, now, request))
        return f"{token_hash}.{now}.{signature}"

    def _vouched(self, request: Request, vouched: str) -> str:
        """The token hash a fleet member vouches for; 401 unless its signature holds for this
        very request within ``CALLER_TTL_S``."""
        assert self.fleet_key is not None
        token_hash, _, rest = vouched.partition(".")
        stamp, _, signature = rest.rpartition(".")
        try:
            fresh = abs(self.clock() - float(stamp)) <= CALLER_TTL_S
        except ValueError:
            fresh = False
        signed = self.fleet_key.verify(signature, *_vouched_for(token_hash, stamp, request))
        if not (fresh and signed):
            raise _refuse("the fleet's word for this caller did not hold")
        return token_hash

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


def _vouched_for(token_hash: str, stamp: str, request: Request) -> tuple[str, ...]:
    """What a fleet member's word covers: the caller, the time, and this very request."""
    query = request.url.query
    return token_hash, stamp, request.method, request.url.path + (f"?{query}" if query else "")


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
