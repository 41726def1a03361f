"""Sign-in for the page: a token once, then an HttpOnly, SameSite=Strict session cookie."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from ._auth import PUBLIC, Guard, SignedIn
from ._jsonio import JSON
from ._sessions import SESSION_COOKIE

__all__ = ["session_router"]


class SignIn(BaseModel):
    """The token a person pastes into the page."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=512)


def session_router(guard: Guard) -> APIRouter:
    """``/api/v1/session``: who am I (GET), sign in (POST), sign out (DELETE)."""
    router = APIRouter(prefix="/api/v1/session")

    @router.get("")
    def whoami(request: Request, who: SignedIn) -> JSON:
        """The caller's identity, role and projects; with a session, its CSRF secret."""
        sid = request.cookies.get(SESSION_COOKIE)
        session = guard.sessions.get(sid) if sid else None
        csrf = session.csrf if session is not None else None
        return JSON({**who.as_json(), "auth": guard.enabled, "csrf": csrf})

    @router.post("", dependencies=[PUBLIC])
    def sign_in(body: SignIn, request: Request) -> JSON:
        """Open a session for a valid token; 401 for one that opens nothing."""
        if not guard.enabled:
            return JSON({"auth": False, "csrf": None})
        identity, sid, csrf = guard.sign_in(body.token)
        answer = JSON({**identity.as_json(), "auth": True, "csrf": csrf})
        answer.set_cookie(
            SESSION_COOKIE,
            sid,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return answer

    @router.delete("", dependencies=[PUBLIC])
    def sign_out(request: Request) -> JSON:
        """End the session (the cookie opens nothing any more) and drop the cookie."""
        sid = request.cookies.get(SESSION_COOKIE)
        if sid:
            guard.sessions.close(sid)
        answer = JSON({"signed_out": True})
        answer.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return answer

    return router
