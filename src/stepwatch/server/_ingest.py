"""POST /api/v1/ingest: read the body within its limit, decode it, hand it to the group writer."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from ..auth import Identity
from ..model import MAX_ABS_TS_S, MAX_INT64, SampleBatch, check_producer_batch
from ..wire import BINARY_CONTENT_TYPE, JSON_CONTENT_TYPE, WireError, decode, decode_json
from ._auth import Ingester
from ._body import check_owner, read_body
from ._errors import ApiError, error_responses
from ._jsonio import JSON
from ._scope import Scope
from ._writer import GroupWriter, WriterClosed, WriterFull

__all__ = ["WIRE_FORMATS", "IngestStats", "ingest_router"]

_COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_INT64}
_TS = {"type": "number", "minimum": -MAX_ABS_TS_S, "maximum": MAX_ABS_TS_S}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_SAMPLE = {
    "type": "object",
    "required": ["name", "value"],
    "properties": {
        "name": {"type": "string"},
        "labels": _LABELS,
        "step": _COUNT,
        "ts": {**_TS, "description": "seconds since the epoch (default: now)"},
        "value": {"anyOf": [{"type": "number"}, {"enum": ["NaN", "Inf", "+Inf", "-Inf"]}]},
    },
}
_EVENT = {
    "type": "object",
    "required": ["ts", "kind"],
    "properties": {
        "ts": _TS,
        "kind": {"type": "string", "minLength": 1},
        "text": {"type": "string"},
        "labels": _LABELS,
        "data": {"type": "object"},
    },
}
_BATCH = {
    "type": "object",
    "required": ["source", "seq"],
    "properties": {
        "source": {"type": "string", "minLength": 1},
        "seq": _COUNT,
        "samples": {"type": "array", "items": _SAMPLE},
        "events": {"type": "array", "items": _EVENT},
    },
}
#: The route reads its body itself (to refuse one too big early), so the schema says it here.
_OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {
            JSON_CONTENT_TYPE: {"schema": _BATCH},
            BINARY_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


#: The wire formats by content type, as the metrics name them.
_FORMATS = {BINARY_CONTENT_TYPE: "binary", JSON_CONTENT_TYPE: "json"}
WIRE_FORMATS = tuple(_FORMATS.values())


@dataclass
class IngestStats:
    """What ingest took and refused since the start, counted on the event loop (one thread);
    the collector's metrics read it. Counters by wire format; refusals by (status, reason)."""

    batches: Counter[str] = field(default_factory=Counter)
    duplicates: Counter[str] = field(default_factory=Counter)
    samples: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    rejected: Counter[tuple[int, str]] = field(default_factory=Counter)

    def took(self, wire: str, batch: SampleBatch, applied: bool) -> None:
        if not applied:
            self.duplicates[wire] += 1
            return
        self.batches[wire] += 1
        self.samples[wire] += len(batch)
        self.events[wire] += len(batch.events)


def _counting(stats: IngestStats) -> type[APIRoute]:
    """A route class that counts each refusal of its routes, the token checks of their
    dependencies included (they run inside the route's handler)."""

    class Counted(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handle = super().get_route_handler()

            async def counted(request: Request) -> Response:
                try:
                    return await handle(request)
                except ApiError as exc:
                    stats.rejected[exc.status, exc.reason] += 1
                    raise
                except Exception:
                    stats.rejected[500, "internal"] += 1
                    raise

            return counted

    return Counted


#: Why ingest answers 507 (the SDK keeps the batch and retries, as for any 5xx).
_FULL = (
    "the store is at its disk limit and has no old data left to shed: free space on its "
    "file system, or raise --max-store-bytes"
)


def check_runs(scope: Scope, who: Identity, batch: SampleBatch) -> None:
    """A token of some projects writes only data of their runs; data of no run (a node's
    host metrics) only a token of every project does. Checked before anything is stored."""
    if who.projects is None:
        return
    runs = {k.label("run") for k in batch.keys} | {e.labels.get("run") for e in batch.events}
    mine = ", ".join(sorted(who.projects))
    for run in sorted(runs, key=lambda r: r or ""):
        if run is None:
            message = f"{who.name} writes only data with a run of its projects ({mine})"
            raise ApiError(403, message, reason="project")
        if not who.sees(scope.project_of(run)):
            message = f"{who.name} may not write run {run!r}: not a run of {mine}"
            raise ApiError(403, message, reason="project")


def ingest_router(
    writer: GroupWriter,
    max_body_bytes: int,
    clock: Callable[[], float],
    scope: Scope,
    stats: IngestStats | None = None,
    store_full: Callable[[], bool] = lambda: False,
) -> APIRouter:
    """The ingest route, bound to its writer, size limit and clock (default timestamps of JSON);
    ``scope`` says which runs a token may write (and holds the store: sources' owners);
    ``stats`` counts what it took and refused; ``store_full`` whether the store is at its disk
    limit with nothing left to shed."""
    stats = IngestStats() if stats is None else stats
    router = APIRouter(route_class=_counting(stats))

    async def decode_body(content_type: str, body: bytes) -> SampleBatch:
        try:
            if content_type == BINARY_CONTENT_TYPE:
                batch = decode(body)  # column views over the body: cheap enough for the event loop
            else:  # Python per sample: off the loop
                batch = await run_in_threadpool(decode_json, body, clock)
            check_producer_batch(batch)  # the collector's records are never ingested
        except (WireError, ValueError) as exc:
            raise ApiError(400, str(exc), reason="malformed") from None
        return batch

    @router.post(
        "/api/v1/ingest", openapi_extra=_OPENAPI, responses=error_responses(413, 415, 503, 507)
    )
    async def ingest(who: Ingester, request: Request) -> JSON:
        """Store one batch; answer only after it is committed (or known to be a duplicate)."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in (BINARY_CONTENT_TYPE, JSON_CONTENT_TYPE):
            raise ApiError(
                415,
                f"unsupported content type {content_type or '(none)'!r}: "
                f"send {BINARY_CONTENT_TYPE} or {JSON_CONTENT_TYPE}",
                reason="content_type",
            )
        batch = await decode_body(content_type, await read_body(request, max_body_bytes))
        check_runs(scope, who, batch)  # runs' projects are remembered: no query per batch
        await check_owner(scope.store, batch.source, who.name)
        if store_full():  # the sender keeps the batch and sends it again later
            raise ApiError(507, _FULL, {"Retry-After": "60"}, reason="store_full")
        try:
            applied = await asyncio.wrap_future(writer.submit(batch))
        except WriterClosed as exc:  # shutting down, or the queue is full: the sender retries
            why = "queue_full" if isinstance(exc, WriterFull) else "shutting_down"
            retry = {"Retry-After": str(exc.retry_after_s)}
            raise ApiError(503, str(exc), retry, reason=why) from None
        except ValueError as exc:  # the store's own checks: the batch is malformed
            raise ApiError(400, f"batch rejected: {exc}", reason="store_checks") from None
        stats.took(_FORMATS[content_type], batch, applied)
        return JSON(
            {"applied": applied, "source": batch.source, "seq": batch.seq, "samples": len(batch)}
        )

    return router
