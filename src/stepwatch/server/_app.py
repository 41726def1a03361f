"""create_app: the collector's FastAPI application over one open store."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from .. import __version__
from ..act import Playbooks
from ..detect import RuleFiles, builtin_rules
from ..store import Store
from ._actions import actions_router
from ._alerts import alerts_router
from ._audit import audit_router
from ._auth import Auth
from ._commands import commands_router
from ._dashboard import dashboard_router
from ._detection import Detection
from ._errors import install_error_handlers
from ._ingest import ingest_router
from ._jsonio import JSON, error_response
from ._notifications import Notifications
from ._query import query_router
from ._runs import runs_router
from ._silences_api import silences_router
from ._stream import StreamHub, stream_router
from ._writer import GroupWriter

if TYPE_CHECKING:
    from ..act import NotifyConfig

__all__ = ["DEFAULT_MAX_BODY_BYTES", "UI_DIR", "create_app"]

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
#: The page and its script ship inside the package (package data), next to this package.
UI_DIR = Path(__file__).resolve().parent.parent / "ui"


def _probes(writer: GroupWriter) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    def healthz() -> JSON:
        """The process answers: enough for a liveness probe."""
        return JSON({"status": "ok"})

    @router.get("/readyz")
    def readyz() -> JSON:
        """Ready to take batches: the store is open and the writer thread runs."""
        if not writer.alive:
            return error_response(503, "not ready: the store writer is not running")
        return JSON({"status": "ready"})

    @router.get("/", include_in_schema=False)
    def index() -> FileResponse:
        """The web page (public: it holds no data and asks for the token when one is needed)."""
        return FileResponse(UI_DIR / "index.html")

    return router


def create_app(
    store: Store,
    *,
    auth: Auth | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    clock: Callable[[], float] = time.time,
    compact_interval_s: float = 2.0,
    rules: RuleFiles | None = None,
    lateness_s: float = 2.0,
    notify: NotifyConfig | None = None,
    playbooks: Playbooks | None = None,
) -> FastAPI:
    """The collector over an open ``store``; the caller keeps ownership of (and closes) the store.

    Args:
        store: where batches, runs and events go; queries read it back.
        auth: who may call the API; default open (fit for a loopback bind only).
        max_body_bytes: ingest bodies above this are refused with 413.
        clock: wall clock for JSON samples without ``ts`` and runs without ``start``.
        compact_interval_s: how often the writer compacts the store while data arrives.
        rules: the detection rules, watched for changes (default: the built-in pack).
        lateness_s: data time the rules comparing members wait for late samples.
        notify: receivers and routes of alert notifications (none by default).
        playbooks: the allow-list of remediations (none by default).
    """
    writer = GroupWriter(store, compact_interval_s=compact_interval_s)
    streams = StreamHub()
    writer.on_commit.append(streams.publish)
    rules = rules or RuleFiles(base=builtin_rules())
    detection = Detection(
        store, writer, rules, lateness_s=lateness_s, clock=clock, playbooks=playbooks
    )
    writer.on_commit.append(detection.live.feed)
    notifications = Notifications(notify, detection.live, detection.log.record, clock)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        writer.start()
        streams.open()
        notifications.start()
        detection.start()
        try:
            yield
        finally:
            streams.close()
            await run_in_threadpool(writer.stop)  # drain the queue and compact before closing
            await run_in_threadpool(detection.stop)  # detect what the writer handed over last
            await run_in_threadpool(notifications.stop)  # send what detection said last

    app = FastAPI(
        title="stepwatch collector",
        version=__version__,
        lifespan=lifespan,
        dependencies=[Depends(auth or Auth())],
        default_response_class=JSON,
    )
    install_error_handlers(app)
    app.state.streams = streams  # the server closes them first when it stops
    app.state.alert_streams = detection.streams  # these too
    app.include_router(_probes(writer))
    app.include_router(ingest_router(writer, store, max_body_bytes, clock))
    app.include_router(dashboard_router(store))  # before runs: /runs/summary is no run id
    app.include_router(stream_router(streams))
    app.include_router(runs_router(store, clock, detection.finish_run))
    app.include_router(commands_router(detection.commands, store, detection.log))
    app.include_router(alerts_router(detection))
    app.include_router(silences_router(detection.silences))
    app.include_router(actions_router(detection.remediation))
    app.include_router(audit_router(store))
    app.include_router(query_router(store))
    app.mount("/ui", StaticFiles(directory=UI_DIR), name="ui")
    return app
