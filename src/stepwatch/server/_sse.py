"""Server-sent-event subscribers fed from any thread: the hub behind every live stream.

Each subscriber, of one run or of all, holds what it has not been sent yet in a
value of its own (``pending``) and an event on the server's loop that wakes its
stream. Publishers fold news into ``pending`` under the hub's lock, so a thread
never touches the loop beyond a thread-safe wake-up. ``close`` ends every stream
once what it holds is sent, so a shutdown never waits on an open browser.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from fastapi.responses import StreamingResponse

from ._errors import ApiError

__all__ = ["HEARTBEAT_S", "MAX_STREAMS", "Subscriber", "SubscriberHub"]

#: A comment line this often keeps proxies from closing an idle stream (and finds dead clients).
HEARTBEAT_S = 15.0
#: Open streams of one hub; one more is refused (503) rather than hold memory for each.
MAX_STREAMS = 256

P = TypeVar("P")


def _every(run: str | None) -> bool:
    return True


@dataclass(eq=False, slots=True)
class Subscriber(Generic[P]):
    """One open stream: its run (None: all), what it has not been sent, and its wake-up;
    ``allowed`` says which runs its caller may hear of (its projects)."""

    run: str | None
    pending: P
    loop: asyncio.AbstractEventLoop
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    allowed: Callable[[str | None], bool] = _every

    def wants(self, run: str | None) -> bool:
        """Whether news of ``run`` is for this stream."""
        return (self.run is None or self.run == run) and self.allowed(run)


class SubscriberHub(Generic[P]):
    """Subscribers whose news is folded into a ``P`` each; ``publish`` is safe from any thread.

    Args:
        empty: a fresh ``P``: nothing pending.
        render: the stream's text for what a subscriber has pending (empty: nothing to send).
        heartbeat_s: how long a stream stays silent before a heartbeat comment.
        max_streams: how many streams may be open at once.
    """

    def __init__(
        self,
        empty: Callable[[], P],
        render: Callable[[P], str],
        heartbeat_s: float = HEARTBEAT_S,
        max_streams: int = MAX_STREAMS,
    ) -> None:
        self._empty = empty
        self._render = render
        self._heartbeat_s = heartbeat_s
        self._max_streams = max_streams
        self._lock = threading.Lock()
        self._subs: set[Subscriber[P]] = set()
        self._closed = False

    def __bool__(self) -> bool:
        """Whether any stream is open (publishers skip their work when none is)."""
        return bool(self._subs)

    def open(self) -> None:
        """Take subscribers again (a new lifespan of the same app)."""
        with self._lock:
            self._closed = False

    def close(self) -> None:
        """End every open stream and refuse new ones; callable from a signal handler's thread."""
        with self._lock:
            self._closed = True
            subs = list(self._subs)
            for sub in subs:
                sub.closed = True
        for sub in subs:
            self._wake(sub)

    def deliver(self, fold: Callable[[Subscriber[P]], bool]) -> None:
        """``fold`` adds its news to a subscriber's ``pending`` (under the lock): True wakes it."""
        with self._lock:
            told = [sub for sub in self._subs if fold(sub)]
        for sub in told:
            self._wake(sub)

    @staticmethod
    def _wake(sub: Subscriber[P]) -> None:
        try:
            sub.loop.call_soon_threadsafe(sub.wake.set)
        except RuntimeError:  # the loop has closed: that stream is gone already
            pass

    def _take(self, sub: Subscriber[P]) -> tuple[P, bool]:
        """What ``sub`` has to be sent now, and whether its stream ends after it."""
        with self._lock:
            found, sub.pending = sub.pending, self._empty()
            return found, sub.closed

    def response(
        self, run: str | None, allowed: Callable[[str | None], bool] = _every
    ) -> StreamingResponse:
        """The HTTP response of one stream, unbuffered by proxies; 503 when too many are open."""
        if len(self._subs) >= self._max_streams:
            raise ApiError(
                503,
                f"too many open streams ({self._max_streams}); close one or retry later",
                {"Retry-After": "5"},
            )
        return StreamingResponse(
            self.events(run, allowed),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def events(
        self, run: str | None, allowed: Callable[[str | None], bool] = _every
    ) -> AsyncIterator[str]:
        """The text of one SSE stream: what publishers folded in, heartbeat comments."""
        sub = Subscriber(run, self._empty(), asyncio.get_running_loop(), allowed=allowed)
        with self._lock:
            if self._closed:
                return
            self._subs.add(sub)
        try:
            yield "retry: 2000\n: connected\n\n"
            while True:
                try:
                    await asyncio.wait_for(sub.wake.wait(), self._heartbeat_s)
                except TimeoutError:
                    yield ": heartbeat\n\n"
                    continue
                sub.wake.clear()
                found, ended = self._take(sub)
                text = self._render(found)
                if text:
                    yield text
                if ended:
                    return
        finally:
            with self._lock:
                self._subs.discard(sub)
