"""A run's profiler traces: training processes upload them (gzip-compressed Chrome/Kineto
JSON, as ``stepwatch.torch.profile`` writes them), people list and download them (Perfetto
and ``chrome://tracing`` open the file as it is)."""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ..store import MAX_PROFILE_BYTES
from ._auth import Ingester, Reader
from ._body import read_body
from ._errors import ApiError, error_responses
from ._jsonio import JSON
from ._scope import Scope

__all__ = ["PROFILE_UPLOADS", "profiles_router"]

#: The upload path: it reads its body within ``MAX_PROFILE_BYTES`` itself.
PROFILE_UPLOADS = re.compile(r"/api/v1/runs/[^/]+/profiles")
GZIP = "application/gzip"
_OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {GZIP: {"schema": {"type": "string", "format": "binary"}}},
    }
}


def _check_trace(body: bytes) -> None:
    """A gzip stream whose JSON opens with an object (the whole is not parsed here)."""
    try:
        head = zlib.decompressobj(wbits=31).decompress(body, 64)
    except zlib.error as exc:
        raise ApiError(400, f"the trace is not gzip-compressed: {exc}") from None
    if not head.lstrip().startswith(b"{"):
        raise ApiError(400, "the trace is not a Chrome/Kineto JSON object")


def profiles_router(scope: Scope, clock: Callable[[], float] = time.time) -> APIRouter:
    """The profile routes over ``scope``'s store."""
    router = APIRouter(prefix="/api/v1/runs/{run_id}/profiles")
    profiles = scope.store.profiles

    @router.post("", status_code=201, openapi_extra=_OPENAPI, responses=error_responses(413))
    async def upload(
        who: Ingester,
        run_id: str,
        request: Request,
        steps: Annotated[int, Query(ge=1, le=100_000)],
        rank: str | None = None,
        first_step: Annotated[int | None, Query(ge=0)] = None,
    ) -> JSON:
        """Keep a trace of ``steps`` steps from ``first_step`` on ``rank`` of the run."""
        scope.run(who, run_id)
        body = await read_body(request, MAX_PROFILE_BYTES)
        _check_trace(body)
        made = await run_in_threadpool(profiles.put, run_id, rank, first_step, steps, clock(), body)
        return JSON(made.as_dict(), status_code=201)

    @router.get("")
    def listed(who: Reader, run_id: str) -> JSON:
        """The run's traces, newest first (without their bytes)."""
        scope.run(who, run_id)
        return JSON([p.as_dict() for p in profiles.of_run(run_id)])

    @router.get("/{profile_id}", response_class=Response)
    def download(who: Reader, run_id: str, profile_id: str) -> Response:
        """One trace, gzip-compressed Chrome trace JSON (Perfetto opens it)."""
        scope.run(who, run_id)
        trace = profiles.trace(run_id, profile_id)
        if trace is None:
            raise ApiError(404, f"run {run_id!r} has no profile {profile_id!r}")
        name = f"{run_id}-{profile_id}.json.gz"
        disposition = {"Content-Disposition": f'attachment; filename="{name}"'}
        return Response(trace, media_type=GZIP, headers=disposition)

    return router
