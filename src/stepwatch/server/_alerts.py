"""Alerts API: the current alerts (latest state of each), their live stream, acknowledging one."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ..auth import Permission
from ..detect import AlertState, LiveAlert, group_alerts
from ..model import Event
from ._alert_stream import alert_json
from ._auth import need
from ._detection import ACK_EVENT, Detection, acked_ids, latest_alerts
from ._errors import ApiError
from ._jsonio import JSON

__all__ = ["alerts_router"]

#: ``open`` is what fires now; pending conditions are not recorded (one that lapses before
#: its ``for`` ends leaves no trace), so ``pending`` lists none.
States = Literal["open", "firing", "pending", "resolved", "all"]


class AckIn(BaseModel):
    """Who acknowledges, and why."""

    model_config = ConfigDict(extra="forbid")

    by: str = Field(default="", max_length=256)
    comment: str = Field(default="", max_length=4096)


def _wanted(alert: LiveAlert, state: States, kind: str | None) -> bool:
    if kind is not None and alert.kind != kind:
        return False
    if state == "all":
        return True
    if state == "open":
        return alert.state in (AlertState.FIRING, AlertState.PENDING)
    return alert.state == state


class _Alerts:
    """The alerts routes over the collector's detection; each method is one route."""

    def __init__(self, detection: Detection) -> None:
        self.detection = detection

    def _current(self, alert: LiveAlert) -> LiveAlert:
        """A firing alert also counts as silenced when a silence made since matches it."""
        if alert.state != AlertState.FIRING or alert.silenced:
            return alert
        return alert.but(silenced=self.detection.silences.mutes(alert.match_labels))

    def list_alerts(
        self,
        run: str | None = None,
        state: States = "open",
        kind: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> JSON:
        """The latest state of each alert, newest first."""
        store = self.detection.store
        chosen = [a for a in latest_alerts(store, run).values() if _wanted(a, state, kind)]
        chosen.sort(key=lambda a: (a.ts, a.id), reverse=True)
        acked = acked_ids(store, run)
        return JSON([alert_json(self._current(a), a.id in acked) for a in chosen[:limit]])

    def groups(
        self,
        by: str = "kind,run",
        run: str | None = None,
        state: States = "open",
        kind: str | None = None,
    ) -> JSON:
        """The alerts grouped by the values of ``by`` (labels, ``kind``, ``severity``): a burst
        of 64 stragglers is one group. The most severe group first, then the oldest."""
        labels = [k.strip() for k in by.split(",") if k.strip()]
        if not labels:
            raise ApiError(400, "by: give at least one label to group by, e.g. kind,run")
        store = self.detection.store
        chosen = [a for a in latest_alerts(store, run).values() if _wanted(a, state, kind)]
        acked = acked_ids(store, run)
        return JSON(
            [
                {
                    "labels": g.labels,
                    "count": len(g.alerts),
                    "severity": g.severity,
                    "since": g.since,
                    "alerts": [alert_json(self._current(a), a.id in acked) for a in g.alerts],
                }
                for g in group_alerts(chosen, labels)
            ]
        )

    def stats(self) -> JSON:
        """Detection's own health: samples seen, waiting, skipped, raised in time, failures,
        and the rules still warming up (per entity: how much baseline they have)."""
        live = self.detection.live
        counts = dataclasses.asdict(live.stats)
        warming = live.warming_up()
        return JSON(
            {"rules": len(live.rules), "queued": live.queued, **counts, "warming_up": warming}
        )

    async def stream(self, run: str | None = None) -> StreamingResponse:
        """``event: alert`` with the alert's JSON at each transition; a comment every 15 s."""
        return self.detection.streams.response(run)

    async def ack(self, alert_id: str, body: AckIn) -> JSON:
        """Mark an alert acknowledged (recorded as an event); 404 for an unknown id."""
        return await run_in_threadpool(self._ack, alert_id, body)

    def _ack(self, alert_id: str, body: AckIn) -> JSON:
        alert = latest_alerts(self.detection.store).get(alert_id)
        if alert is None:
            raise ApiError(404, f"unknown alert {alert_id!r}")
        data = {"id": alert_id, "by": body.by, "comment": body.comment}
        event = Event(self.detection.clock(), ACK_EVENT, body.comment, dict(alert.labels), data)
        self.detection.log.write([event])
        return JSON(alert_json(self._current(alert), acked=True))


def alerts_router(detection: Detection) -> APIRouter:
    """The alerts routes over ``detection``."""
    alerts = _Alerts(detection)
    router = APIRouter(prefix="/api/v1/alerts")
    read, operate = [need(Permission.READ)], [need(Permission.OPERATE)]
    router.add_api_route("", alerts.list_alerts, methods=["GET"], dependencies=read)
    router.add_api_route("/stream", alerts.stream, methods=["GET"], dependencies=read)
    router.add_api_route("/groups", alerts.groups, methods=["GET"], dependencies=read)
    router.add_api_route("/stats", alerts.stats, methods=["GET"], dependencies=read)
    router.add_api_route("/{alert_id}/ack", alerts.ack, methods=["POST"], dependencies=operate)
    return router
