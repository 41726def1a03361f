"""Live updates: the writer's commits fanned out to server-sent-event subscribers, per run.

The writer thread publishes what each commit brought (newest sample time and
event kinds per run); every subscriber has an asyncio queue on the server's
loop, fed thread-safely. ``close`` ends every stream at once, so a shutdown
never waits on a browser that keeps its dashboard open.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from ..model import SampleBatch

__all__ = ["Change", "StreamHub", "changes", "stream_router"]

#: A comment line this often keeps proxies from closing an idle stream (and finds dead clients).
HEARTBEAT_S = 15.0


@dataclass(slots=True)
class Change:
    """What one run gained: newest sample ts (None: no samples), event kinds -> newest ts."""

    ts: float | None = None
    events: dict[str, float] = field(default_factory=dict)

    def merge(self, other: Change) -> None:
        if other.ts is not None:
            self.ts = other.ts if self.ts is None else max(self.ts, other.ts)
        for kind, ts in other.events.items():
            self.events[kind] = max(ts, self.events.get(kind, ts))


Changes = dict[str | None, Change]


def _merge(into: Changes, more: Changes) -> None:
    for run, change in more.items():
        into.setdefault(run, Change()).merge(change)


def changes(batches: Sequence[SampleBatch]) -> Changes:
    """Per run label (None: samples without one): the newest sample ts and event kinds."""
    out: Changes = {}
    for batch in batches:
        if len(batch):
            runs = [k.label("run") for k in batch.keys]
            if len(set(runs)) == 1:
                out.setdefault(runs[0], Change()).merge(Change(float(batch.ts.max())))
            else:
                names = sorted(set(runs), key=lambda r: r or "")
                index = np.array([names.index(r) for r in runs], np.int64)[batch.series]
                for i, run in enumerate(names):
                    ts = batch.ts[index == i]
                    if ts.size:
                        out.setdefault(run, Change()).merge(Change(float(ts.max())))
        for event in batch.events:
            change = out.setdefault(event.labels.get("run"), Change())
            change.merge(Change(None, {event.kind: float(event.ts)}))
    return out


@dataclass(eq=False, slots=True)
class _Subscriber:
    """One open stream: what it has not been told yet (at most a line per run) and its wake-up."""

    run: str | None
    loop: asyncio.AbstractEventLoop
    wake: asyncio.Event
    pending: Changes = field(default_factory=dict)
    closed: bool = False


class StreamHub:
    """Subscribers per run; ``publish`` is a writer commit hook, safe from any thread.

    Commits merge into each subscriber's pending changes, so a slow reader costs a
    line per run, never a queue that grows with every commit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: set[_Subscriber] = set()
        self._closed = False

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

    def publish(self, batches: Sequence[SampleBatch]) -> None:
        """Tell the subscribers of each run what the committed ``batches`` brought."""
        if not self._subs:
            return
        found = changes(batches)
        told = []
        with self._lock:
            for sub in self._subs:
                mine = {r: c for r, c in found.items() if sub.run is None or r == sub.run}
                _merge(sub.pending, mine)
                if mine:
                    told.append(sub)
        for sub in told:
            self._wake(sub)

    @staticmethod
    def _wake(sub: _Subscriber) -> None:
        try:
            sub.loop.call_soon_threadsafe(sub.wake.set)
        except RuntimeError:  # the loop has closed: that stream is gone already
            pass

    def _take(self, sub: _Subscriber) -> Changes | None:
        """What ``sub`` has to be told now; None once the hub closed it."""
        with self._lock:
            if sub.closed:
                return None
            found, sub.pending = sub.pending, {}
            return found

    async def events(self, run: str | None) -> AsyncIterator[str]:
        """The text of one SSE stream: ``event: data`` and ``event: events`` per run changed."""
        sub = _Subscriber(run, asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            if self._closed:
                return
            self._subs.add(sub)
        try:
            yield "retry: 2000\n: connected\n\n"
            while True:
                try:
                    await asyncio.wait_for(sub.wake.wait(), HEARTBEAT_S)
                except TimeoutError:
                    yield ": heartbeat\n\n"
                    continue
                sub.wake.clear()
                found = self._take(sub)
                if found is None:
                    return
                if found:
                    yield _render(found)
        finally:
            with self._lock:
                self._subs.discard(sub)


def _render(found: Changes) -> str:
    parts = []
    for run, change in found.items():
        if change.ts is not None:
            parts.append(f"event: data\ndata: {json.dumps({'run': run, 'ts': change.ts})}\n\n")
        if change.events:
            body = json.dumps({"run": run, "kinds": change.events})
            parts.append(f"event: events\ndata: {body}\n\n")
    return "".join(parts)


def stream_router(hub: StreamHub) -> APIRouter:
    """``GET /api/v1/stream?run=``: server-sent events as new data of the run is committed."""
    router = APIRouter()

    @router.get("/api/v1/stream")
    async def stream(run: str | None = None) -> StreamingResponse:
        """``event: data`` {run, ts} on new samples, ``event: events`` {run, kinds} on events."""
        return StreamingResponse(
            hub.events(run),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return router
