"""Alerts API: the current alerts (latest state of each), their live stream, acknowledging one."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ..auth import Identity
from ..detect import AlertState, LiveAlert, group_alerts
from ..model import Event
from ._alert_stream import alert_json
from ._auth import Operator, Reader
from ._detection import ACK_EVENT, Detection, acked_ids, latest_alerts
from ._errors import ApiError
from ._jsonio import JSON
from ._scope import Scope

__all__ = ["alerts_router"]

#: ``open`` is what fires now; pending conditions are not recorded (one that lapses before
#: its ``for`` ends leaves no trace), so ``pending`` lists none.
States = Literal["open", "firing", "pending", "resolved", "all"]


class AckIn(BaseModel):
    """Why (who acknowledges is the caller's identity)."""

    model_config = ConfigDict(extra="forbid")

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

    def __init__(self, detection: Detection, scope: Scope) -> None:
        self.detection, self.scope = detection, scope

    def _latest(self, who: Identity, run: str | None = None) -> list[LiveAlert]:
        """The latest state of each alert of the caller's projects (oldest first)."""
        found = latest_alerts(self.detection.store, run).values()
        return [a for a in found if self.scope.sees(who, a.labels)]

    def _current(self, alert: LiveAlert) -> LiveAlert:
        """A firing alert also counts as silenced when a silence made since matches it."""
        if alert.state != AlertState.FIRING or alert.silenced:
            return alert
        return alert.but(silenced=self.detection.silences.mutes(alert.match_labels))

    def list_alerts(
        self,
        who: Reader,
        run: str | None = None,
        state: States = "open",
        kind: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> JSON:
        """The latest state of each alert, newest first."""
        store = self.detection.store
        chosen = [a for a in self._latest(who, run) if _wanted(a, state, kind)]
        chosen.sort(key=lambda a: (a.ts, a.id), reverse=True)
        acked = acked_ids(store, run)
        return JSON([alert_json(self._current(a), a.id in acked) for a in chosen[:limit]])

    def groups(
        self,
        who: Reader,
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
        chosen = [a for a in self._latest(who, run) if _wanted(a, state, kind)]
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

    def stats(self, who: Reader) -> JSON:
        """Detection's own health: samples seen, waiting, skipped, raised in time, failures
        (collector-wide counts), and the rules still warming up on the caller's entities."""
        live = self.detection.live
        counts = dataclasses.asdict(live.stats)
        warming = [w for w in live.warming_up() if self.scope.sees(who, w["labels"])]
        return JSON(
            {"rules": len(live.rules), "queued": live.queued, **counts, "warming_up": warming}
        )

    async def stream(self, who: Reader, run: str | None = None) -> StreamingResponse:
        """``event: alert`` with the alert's JSON at each transition; a comment every 15 s."""
        return self.detection.streams.response(run, self.scope.hears(who))

    async def ack(self, who: Operator, alert_id: str, body: AckIn) -> JSON:
        """Mark an alert acknowledged (recorded as an event); 404 for an unknown id."""
        return await run_in_threadpool(self._ack, who, alert_id, body)

    def _ack(self, who: Identity, alert_id: str, body: AckIn) -> JSON:
        alert = latest_alerts(self.detection.store).get(alert_id)
        if alert is None or not self.scope.sees(who, alert.labels):
            raise ApiError(404, f"unknown alert {alert_id!r}")
        data = {"id": alert_id, "by": who.actor, "comment": body.comment}
        event = Event(self.detection.clock(), ACK_EVENT, body.comment, dict(alert.labels), data)
        self.detection.log.write([event])
        return JSON(alert_json(self._current(alert), acked=True))


def alerts_router(detection: Detection, scope: Scope) -> APIRouter:
    """The alerts routes over ``detection``, limited to the caller's projects."""
    alerts = _Alerts(detection, scope)
    router = APIRouter(prefix="/api/v1/alerts")
    router.add_api_route("", alerts.list_alerts, methods=["GET"])
    router.add_api_route("/stream", alerts.stream, methods=["GET"])
    router.add_api_route("/groups", alerts.groups, methods=["GET"])
    router.add_api_route("/stats", alerts.stats, methods=["GET"])
    router.add_api_route("/{alert_id}/ack", alerts.ack, methods=["POST"])
    return router
