"""What every writing route checks of a request before it stores anything: a body read no
further than its limit, and a source sent only by the identity that owns it."""

from __future__ import annotations

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from ..store import Store
from ._errors import ApiError

__all__ = ["check_owner", "read_body"]


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, f"bad Content-Length header {declared!r}", reason="length")
        if int(declared) > limit:
            message = f"body of {int(declared)} bytes exceeds the {limit}-byte limit"
            raise ApiError(413, message, reason="too_large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, f"body exceeds the {limit}-byte limit", reason="too_large")
    return bytes(body)


async def check_owner(store: Store, source: str, sender: str) -> None:
    """A source belongs to the identity (by name: a token renewed under its name keeps them)
    that sent it first; another identity's batch is a 403."""
    bound = store.owner_of(source)
    if bound is None:
        bound = await run_in_threadpool(store.claim_source, source, sender)
    if bound != sender:
        raise ApiError(403, f"source {source!r} belongs to another identity", reason="owner")
