"""Dashboard sessions: a cookie that stands for a token, so the page never keeps the token."""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SESSION_COOKIE", "Session", "SessionBook"]

SESSION_COOKIE = "stepwatch_session"


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in page: which token it stands for (by hash) and its CSRF secret."""

    token_hash: str
    csrf: str
    expires: float


class SessionBook:
    """Sessions in memory, oldest evicted past ``limit``; a restart signs every page out."""

    def __init__(
        self,
        ttl_s: float = 12 * 3600.0,
        limit: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._ttl, self._limit, self._clock = ttl_s, limit, clock
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def open(self, token_hash: str) -> tuple[str, Session]:
        """A new session id (the cookie's value) and its session."""
        sid = secrets.token_urlsafe(32)
        session = Session(token_hash, secrets.token_urlsafe(24), self._clock() + self._ttl)
        with self._lock:
            self._sessions[sid] = session
            while len(self._sessions) > self._limit:
                self._sessions.popitem(last=False)
        return sid, session

    def get(self, sid: str) -> Session | None:
        """The live session with this id, or None (unknown or expired)."""
        with self._lock:
            session = self._sessions.get(sid)
            if session is not None and session.expires <= self._clock():
                del self._sessions[sid]
                return None
            return session

    def close(self, sid: str) -> None:
        """Sign out: the cookie opens nothing any more."""
        with self._lock:
            self._sessions.pop(sid, None)
