"""Live updates: the writer's commits fanned out to server-sent-event subscribers, per run.

The writer thread publishes what each commit brought (newest sample time and
event kinds per run) into a subscriber hub (see ``_sse``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from ..model import SampleBatch
from ._auth import Reader
from ._scope import Scope
from ._sse import MAX_STREAMS, Subscriber, SubscriberHub

__all__ = ["Change", "StreamHub", "changes", "stream_router"]


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


class StreamHub(SubscriberHub[Changes]):
    """Subscribers per run; ``publish`` is a writer commit hook, safe from any thread.

    Commits merge into each subscriber's pending changes, so a slow reader costs a
    line per run, never a queue that grows with every commit. ``events(run)`` is the
    text of one stream: ``event: data`` and ``event: events`` per run changed.
    """

    def __init__(self, max_streams: int = MAX_STREAMS) -> None:
        super().__init__(dict, _render, max_streams=max_streams)

    def publish(self, batches: Sequence[SampleBatch]) -> None:
        """Tell the subscribers of each run what the committed ``batches`` brought."""
        if not self:
            return
        found = changes(batches)

        def fold(sub: Subscriber[Changes]) -> bool:
            mine = {r: c for r, c in found.items() if sub.wants(r)}
            _merge(sub.pending, mine)
            return bool(mine)

        self.deliver(fold)


def _render(found: Changes) -> str:
    parts = []
    for run, change in found.items():
        if change.ts is not None:
            parts.append(f"event: data\ndata: {json.dumps({'run': run, 'ts': change.ts})}\n\n")
        if change.events:
            body = json.dumps({"run": run, "kinds": change.events})
            parts.append(f"event: events\ndata: {body}\n\n")
    return "".join(parts)


def stream_router(hub: StreamHub, scope: Scope) -> APIRouter:
    """``GET /api/v1/stream?run=``: server-sent events as new data of the run is committed
    (of the caller's projects only)."""
    router = APIRouter()

    @router.get("/api/v1/stream")
    async def stream(who: Reader, run: str | None = None) -> StreamingResponse:
        """``event: data`` {run, ts} on new samples, ``event: events`` {run, kinds} on events."""
        return hub.response(run, scope.hears(who))

    return router
