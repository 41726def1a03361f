"""Any collector of a fleet answers for every run: a request about one run goes to the collector
that reads the run's partition, and the runs lists gather every member's runs.

The caller is identified here and vouched for to the other collector with the fleet key (never
by passing the token on); a request that came from another member is answered where it lands,
so a request travels one hop at most. A run's event streams are relayed from its owner; the
streams of every run are the collector's own.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ._auth import CALLER_HEADER, Guard
from ._errors import ApiError
from ._fleet_api import FleetSlot
from ._jsonio import JSON, error_response

__all__ = ["HOP_HEADER", "FleetProxy"]

#: Marks a request one member passed to another: it is answered there, never passed on.
HOP_HEADER = "x-stepwatch-hop"
#: Lists every member contributes to, merged by run id.
MERGED = ("/api/v1/runs", "/api/v1/runs/summary")
#: Served by the collector they reach (what names no run, or is its own).
LOCAL = ("/api/v1/fleet", "/api/v1/session")
#: Server-sent events: a run's are relayed from its owner as they come.
STREAMS = ("/api/v1/stream", "/api/v1/alerts/stream")
_RUN_PATH = re.compile(r"^/api/v1/runs/(?P<run>[^/]+)(?:/.*)?$")
_PASSED = ("content-type", "accept")
_RETURNED = ("content-type", "www-authenticate")
_STREAMED = ("content-type", "cache-control", "x-accel-buffering")
TIMEOUT_S = 30.0


def run_of(path: str, query: str) -> str | None:
    """The run a request is about: the run in its path, else its one ``run`` parameter."""
    found = _RUN_PATH.match(path)
    if found and found["run"] != "summary":
        return found["run"]
    runs = parse_qs(query).get("run", [])
    return runs[0] if len(runs) == 1 else None


class FleetProxy:
    """ASGI middleware: passes a run's requests to its owner and merges the runs lists."""

    def __init__(self, app: ASGIApp, slot: FleetSlot, guard: Guard) -> None:
        self.app, self.slot, self.guard = app, slot, guard
        slot.relays = self.relays = Relays()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        intake = self.slot.intake
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or intake is None
            or not path.startswith("/api/v1/")
            or path in LOCAL
            or any(k.decode().lower() == HOP_HEADER for k, _ in scope.get("headers", []))
        ):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        me = intake.members.me.id
        run = run_of(path, request.url.query)
        if run is not None:
            owner = intake.owner_of(run)
            if owner is None or owner.id == me:
                await self.app(scope, receive, send)
                return
            if path in STREAMS:
                answer = await self._relayed(request, owner.id, owner.url)
            else:
                answer = await self._passed(request, [(owner.id, owner.url)])
        elif request.method == "GET" and path in MERGED:
            members = sorted((m.id, m.url) for m in intake.members.alive().values())
            answer = await self._passed(request, members, merge=True)
        else:
            await self.app(scope, receive, send)
            return
        await answer(scope, receive, send)

    async def _headers(self, request: Request) -> dict[str, str]:
        """What the request carries to another member: the caller vouched for (ApiError when
        the caller is refused here), and the mark of a request passed on."""
        caller = await asyncio.to_thread(self.guard.caller, request)
        headers = {k: v for k, v in request.headers.items() if k in _PASSED}
        headers[HOP_HEADER] = "1"
        if caller is not None:
            headers[CALLER_HEADER] = caller
        return headers

    async def _relayed(self, request: Request, who: str, url: str) -> Response:
        """The owner's event stream, passed on as it comes until either side ends it (or this
        collector stops); an owner that cannot be reached is a 502, and the page retries."""
        try:
            headers = await self._headers(request)
        except ApiError as exc:
            return error_response(exc.status, exc.message, exc.headers)
        client = httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT_S, read=None))
        try:
            upstream = await client.send(
                client.build_request("GET", url + _target(request), headers=headers), stream=True
            )
        except httpx.HTTPError:
            await client.aclose()
            return error_response(502, f"collector {who}, which holds this run, is unreachable")
        if upstream.status_code != 200:
            body = await upstream.aread()
            await client.aclose()
            return Response(body, upstream.status_code, media_type="application/json")
        kept = {k: v for k, v in upstream.headers.items() if k in _STREAMED}
        return StreamingResponse(self.relays.relay(upstream, client), headers=kept)

    async def _passed(
        self, request: Request, members: list[tuple[str, str]], *, merge: bool = False
    ) -> Response:
        """The answer of ``members`` (one; or each, merged) to ``request``, as its caller."""
        try:
            headers = await self._headers(request)
        except ApiError as exc:
            return error_response(exc.status, exc.message, exc.headers)
        body = await request.body()
        target = _target(request)
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            answers = await asyncio.gather(
                *(client.request(request.method, url + target, content=body, headers=headers)
                  for _, url in members),
                return_exceptions=True,
            )  # fmt: skip
        if not merge:
            (answer,) = answers
            if isinstance(answer, BaseException):
                who = members[0][0]
                return error_response(502, f"collector {who}, which holds this run, is unreachable")
            kept = {k: v for k, v in answer.headers.items() if k in _RETURNED}
            return Response(answer.content, answer.status_code, headers=kept)
        return _merged(members, answers, self.slot.owner)


def _target(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


class Relays:
    """The event streams relayed now; ``close`` ends them all (from any thread), so a
    collector that stops never waits on a browser watching another member's run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._closed = False

    def open(self) -> None:
        """Relay again (a new lifespan of the same app)."""
        with self._lock:
            self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            found = list(self._open)
        for loop, stop in found:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # its loop is gone, and the stream with it
                pass

    async def relay(
        self, upstream: httpx.Response, client: httpx.AsyncClient
    ) -> AsyncIterator[bytes]:
        """The upstream's bytes as they come, until it ends, fails, or the relays close."""
        mine = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            if self._closed:
                mine[1].set()
            self._open.add(mine)
        chunks = upstream.aiter_raw().__aiter__()
        stopped = asyncio.ensure_future(mine[1].wait())
        try:
            while True:
                nxt = asyncio.ensure_future(chunks.__anext__())
                await asyncio.wait({nxt, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if stopped.done():
                    nxt.cancel()
                    return
                try:
                    yield nxt.result()
                except (StopAsyncIteration, httpx.HTTPError):
                    return  # the owner ended it or went away: the page opens it again
        finally:
            stopped.cancel()
            with self._lock:
                self._open.discard(mine)
            await upstream.aclose()
            await client.aclose()


def _merged(
    members: list[tuple[str, str]], answers: list[Any], owner: Callable[[str], str | None]
) -> Response:
    """Every member's runs, one record per run, its owner's where two members hold it (the
    newest by start first); a member that did not answer is named in
    ``X-Stepwatch-Fleet-Missing``; a refusal is the refusal."""
    runs: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for (who, _), answer in zip(members, answers, strict=True):
        if isinstance(answer, BaseException) or answer.status_code >= 500:
            missing.append(who)
            continue
        if answer.status_code != 200:
            return Response(answer.content, answer.status_code, media_type="application/json")
        for record in answer.json():
            if record["id"] not in runs or owner(record["id"]) == who:
                runs[record["id"]] = record
    found = sorted(runs.values(), key=lambda r: (-(r.get("start") or 0.0), r["id"]))
    headers = {"X-Stepwatch-Fleet-Missing": ",".join(missing)} if missing else None
    return JSON(found, headers=headers)
