"""Alert transitions pushed to server-sent-event subscribers as the live detector makes them.

The detector thread publishes; every subscriber has a bounded asyncio queue
on the server's loop, fed thread-safely. A subscriber too slow to keep up is
ended (its client reconnects and lists the alerts) rather than buffered
without bound. ``close`` ends every stream, so a shutdown never waits on them.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..detect import LiveAlert
from ._jsonio import clean

__all__ = ["HEARTBEAT_S", "AlertStreams", "alert_json"]

#: A comment line this often keeps proxies from closing an idle stream (and finds dead clients).
HEARTBEAT_S = 15.0
#: Transitions a subscriber may have waiting before it is cut off.
MAX_WAITING = 1000


def alert_json(alert: LiveAlert, acked: bool = False) -> dict[str, object]:
    """The API's shape of an alert (non-finite numbers spelled as strings)."""
    return clean({**alert.as_json(), "acked": acked})  # type: ignore[no-any-return]


@dataclass(eq=False, slots=True)
class _Subscriber:
    run: str | None
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[str | None]


class AlertStreams:
    """Subscribers, optionally of one run; ``publish`` is a live-detector subscriber."""

    def __init__(self, heartbeat_s: float = HEARTBEAT_S) -> None:
        self._heartbeat_s = heartbeat_s
        self._lock = threading.Lock()
        self._subs: set[_Subscriber] = set()
        self._closed = False

    def open(self) -> None:
        """Take subscribers again (a new lifespan of the same app)."""
        with self._lock:
            self._closed = False

    def close(self) -> None:
        """End every stream and refuse new ones; safe from any thread."""
        with self._lock:
            self._closed = True
            subs = list(self._subs)
        for sub in subs:
            self._send(sub, None)

    def publish(self, alert: LiveAlert) -> None:
        """Send one transition to the subscribers of its run."""
        with self._lock:
            subs = [s for s in self._subs if s.run is None or s.run == alert.labels.get("run")]
        if subs:
            text = f"event: alert\ndata: {json.dumps(alert_json(alert))}\n\n"
            for sub in subs:
                self._send(sub, text)

    @staticmethod
    def _send(sub: _Subscriber, item: str | None) -> None:
        def put() -> None:
            if sub.queue.full():  # too slow: end it rather than buffer without bound
                sub.queue.get_nowait()
                item_or_end: str | None = None
            else:
                item_or_end = item
            sub.queue.put_nowait(item_or_end)

        try:
            sub.loop.call_soon_threadsafe(put)
        except RuntimeError:  # the loop has closed: that stream is gone already
            pass

    async def events(self, run: str | None) -> AsyncIterator[str]:
        """The text of one SSE stream: ``event: alert`` per transition, heartbeat comments."""
        sub = _Subscriber(run, asyncio.get_running_loop(), asyncio.Queue(MAX_WAITING))
        with self._lock:
            if self._closed:
                return
            self._subs.add(sub)
        try:
            yield "retry: 2000\n: connected\n\n"
            while True:
                try:
                    item = await asyncio.wait_for(sub.queue.get(), self._heartbeat_s)
                except TimeoutError:
                    yield ": heartbeat\n\n"
                    continue
                if item is None:
                    return
                yield item
        finally:
            with self._lock:
                self._subs.discard(sub)
