"""create_app: the collector's FastAPI application over one open store."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from .. import __version__
from ..act import Playbooks
from ..auth import TokenBook
from ..detect import RuleFiles, builtin_rules
from ..store import Store
from ..tsdb import LINE_PROTOCOL, REMOTE_WRITE, Forwarder
from ._actions import actions_router
from ._advice import advice_router
from ._alerts import alerts_router
from ._analysis_api import analysis_router
from ._analyst import Analyst
from ._audit import audit_router
from ._auth import PUBLIC, Guard, SignedIn, include
from ._bulk import BULK_PATHS, bulk_router
from ._commands import commands_router
from ._dashboard import dashboard_router
from ._detection import Detection
from ._errors import COMMON_ERRORS, error_responses, install_error_handlers, refusals_as_sent
from ._fleet_api import FleetSlot, fleet_router
from ._fleet_proxy import FleetProxy
from ._forecast import forecast_router
from ._forecasting import ForecastWorker
from ._guards import Guards
from ._ingest import IngestStats, ingest_router
from ._jsonio import JSON, error_response
from ._log_search import log_search_router
from ._metrics import Parts, StoreFigures, metrics_registry, metrics_router
from ._notifications import Notifications
from ._options import DEFAULT_OPTIONS, CollectorOptions
from ._profile_analysis import profile_analysis_router
from ._profiles_api import PROFILE_UPLOADS, profiles_router
from ._query import query_router
from ._readiness import Readiness
from ._runs import runs_router
from ._scope import Scope
from ._session_api import session_router
from ._silences_api import silences_router
from ._stream import StreamHub, stream_router
from ._tokens_api import tokens_router
from ._upkeep import StoreUpkeep
from ._writer import GroupWriter

if TYPE_CHECKING:
    from ..act import NotifyConfig

__all__ = ["UI_DIR", "create_app"]

#: The page and its script ship inside the package (package data), next to this package.
UI_DIR = Path(__file__).resolve().parent.parent / "ui"


def _probes(readiness: Readiness) -> APIRouter:
    """Open to probes and browsers: they carry no data."""
    router = APIRouter(dependencies=[PUBLIC])

    @router.get("/healthz")
    def healthz() -> JSON:
        """The process answers: enough for a liveness probe."""
        return JSON({"status": "ok"})

    @router.get("/readyz", responses=error_responses(503))
    def readyz() -> JSON:
        """Ready to take batches: every readiness check passes (the store is open, the writer
        thread runs...); else 503 with the first reason."""
        reason = readiness.not_ready()
        if reason is not None:
            return error_response(503, f"not ready: {reason}")
        return JSON({"status": "ready"})

    @router.get("/", include_in_schema=False)
    def index() -> FileResponse:
        """The web page (public: it holds no data and asks for the token when one is needed)."""
        return FileResponse(UI_DIR / "index.html")

    return router


def _docs(app: FastAPI) -> APIRouter:
    """The OpenAPI schema and its page, for whoever may call the API (auth on: a token)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/openapi.json")
    def schema(who: SignedIn) -> JSON:
        return JSON(refusals_as_sent(app.openapi()))

    @router.get("/docs")
    def docs(who: SignedIn) -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=app.title)

    return router


def create_app(
    store: Store,
    options: CollectorOptions = DEFAULT_OPTIONS,
    *,
    tokens: TokenBook | None = None,
    rules: RuleFiles | None = None,
    notify: NotifyConfig | None = None,
    playbooks: Playbooks | None = None,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The collector over an open ``store``; the caller keeps ownership of (and closes) the store.

    Args:
        store: where batches, runs and events go; queries read it back.
        options: its limits, intervals and Host names (the files in them are the caller's to
            load: ``rules``, ``notify`` and ``playbooks``).
        tokens: the tokens that open the API; None leaves it open (fit for a loopback bind
            only: everyone is the local admin).
        rules: the detection rules, watched for changes (default: the built-in pack).
        notify: receivers and routes of alert notifications (none by default).
        playbooks: the allow-list of remediations (none by default).
        clock: wall clock for JSON samples without ``ts`` and runs without ``start``.
    """
    writer = GroupWriter(
        store,
        compact_interval_s=options.compact_interval_s,
        max_queued_rows=options.max_queued_rows,
    )
    streams = StreamHub()
    writer.on_commit.append(streams.publish)
    rules = rules or RuleFiles(base=builtin_rules())
    scope = Scope(store)  # projects are tenants: every route below sees only the caller's
    detection = Detection(
        store,
        writer,
        rules,
        lateness_s=options.lateness_s,
        clock=clock,
        playbooks=playbooks,
        project_of=scope.project_of,
        checkpoint_interval_s=options.checkpoint_interval_s,
    )
    writer.on_commit.append(detection.feed)
    forwards = [Forwarder(url, REMOTE_WRITE) for url in options.remote_write]
    forwards += [Forwarder(url, LINE_PROTOCOL) for url in options.influx_write]
    for forward in forwards:
        writer.on_commit.append(forward.offer)
    upkeep = StoreUpkeep(
        store,
        detection.live.feed,
        options.retention,
        options.disk_cap,
        interval_s=options.upkeep_interval_s,
    )

    def ingest_behind() -> bool:
        """Whether ingest is behind: the background workers then wait (ingest comes first)."""
        return writer.queued[0] > options.max_queued_rows // 4

    forecasts = ForecastWorker(
        store,
        options.forecast_interval_s,
        behind=ingest_behind,
        clock=clock,
    )
    analyst = None
    if options.analyst is not None:  # incidents go to a model only when asked to
        analyst = Analyst(
            store,
            options.analyst,
            detection.remediation.playbooks,
            clock=clock,
            behind=ingest_behind,
        )
    notifications = Notifications(
        notify, detection.live, detection.log.record, clock, scope.project_of,
        history=detection.log.audits_since, playbooks=detection.remediation.for_incident,
    )  # fmt: skip
    if notifications.notifier is not None:
        detection.checkpoints.parts.append(notifications.notifier)
    detection.restore()  # before the writer takes a batch

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        writer.start()
        streams.open()
        if fleet.relays is not None:
            fleet.relays.open()
        notifications.start()
        detection.start()
        upkeep.start()
        for forward in forwards:
            forward.start()
        if options.forecast_interval_s:
            forecasts.start()
        if analyst is not None:
            analyst.start()
        try:
            yield
        finally:
            streams.close()
            if fleet.relays is not None:
                fleet.relays.close()
            await run_in_threadpool(forecasts.stop)  # after the forecast it makes, if any
            if analyst is not None:  # an answer under way is abandoned
                await run_in_threadpool(analyst.stop)
            await run_in_threadpool(upkeep.stop)  # after the chunk it deletes, if any
            await run_in_threadpool(writer.stop)  # drain the queue and compact before closing
            for forward in forwards:  # what waits unsent is counted dropped
                await run_in_threadpool(forward.stop)
            await run_in_threadpool(detection.stop)  # detect what the writer handed over last
            await run_in_threadpool(notifications.stop)  # send what detection said last
            await run_in_threadpool(detection.checkpoints.stop)  # and keep where they stand

    app = FastAPI(
        title="stepwatch collector",
        version=__version__,
        lifespan=lifespan,
        default_response_class=JSON,
        responses=COMMON_ERRORS,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.guard = guard = Guard(tokens, fleet_key=options.fleet_key)
    app.state.fleet = fleet = FleetSlot()  # the broker intake, once the collector listens
    install_error_handlers(app)
    app.add_middleware(FleetProxy, slot=fleet, guard=guard)  # inside the guards
    app.add_middleware(
        Guards,
        hosts=options.hosts(),
        max_json_bytes=options.max_json_bytes,
        own_limits=(re.compile("/api/v1/ingest"), PROFILE_UPLOADS, BULK_PATHS),  # own limits
    )
    app.state.streams = streams  # the server closes them first when it stops
    app.state.alert_streams = detection.streams  # these too
    app.state.readiness = readiness = Readiness(
        lambda: "the store is closed" if store.closed else None,
        lambda: None if writer.alive else "the store writer is not running",
        lambda: None if detection.live.ready else "restoring detection state",
    )  # parts that restore state add their checks
    ingest = IngestStats()
    parts = Parts(
        ingest,
        writer,
        detection.live,
        notifications.notifier,
        detection.remediation,
        StoreFigures(store),
        readiness,
        clock,
        forwards,
        fleet,
        analyst,
    )
    include(app, _probes(readiness))
    include(app, metrics_router(metrics_registry(parts), public=options.metrics_public))
    include(app, _docs(app))
    include(app, session_router(app.state.guard))
    if tokens is not None:
        include(app, tokens_router(tokens))
    include(
        app,
        ingest_router(writer, options.max_body_bytes, clock, scope, ingest, lambda: upkeep.full),
    )
    include(app, dashboard_router(scope))  # before runs: /runs/summary is no run id
    include(app, stream_router(streams, scope))
    include(app, runs_router(scope, clock, detection.finish_run))
    include(app, forecast_router(scope))
    include(app, profiles_router(scope, clock))
    include(app, profile_analysis_router(scope))
    include(app, advice_router(scope))
    include(app, commands_router(detection.commands, scope, detection.log))
    include(app, alerts_router(detection, scope))
    include(app, analysis_router(analyst, scope))
    include(app, silences_router(detection.silences, store))
    include(app, actions_router(detection.remediation, scope))
    include(app, audit_router(scope))
    include(app, fleet_router(fleet))
    include(app, query_router(scope))
    include(app, log_search_router(scope))
    include(app, bulk_router(writer, options.max_body_bytes, clock, scope))
    app.mount("/ui", StaticFiles(directory=UI_DIR), name="ui")
    return app
