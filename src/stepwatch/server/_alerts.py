"""Alerts API: the current alerts (latest state of each), their live stream, acknowledging one."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ..auth import Identity
from ..detect import AlertState, group_alerts, incidents
from ..model import Event
from ..store import AlertQuery, AlertRow, AlertStates
from ._alert_stream import alert_json
from ._analysis_api import with_analyses
from ._analyst import GROUPED
from ._auth import Operator, Reader
from ._detection import ACK_EVENT, Detection, live_alert
from ._errors import ApiError
from ._jsonio import JSON
from ._paging import page, paged
from ._params import seconds
from ._scope import Scope

__all__ = ["alerts_router"]

#: How many alerts ``/groups`` groups at most (the newest).


class AckIn(BaseModel):
    """Why (who acknowledges is the caller's identity)."""

    model_config = ConfigDict(extra="forbid")

    comment: str = Field(default="", max_length=4096)


class _Alerts:
    """The alerts routes over the store's alert table and the collector's detection; each
    method is one route. ``open`` is what fires now; pending conditions are not recorded (one
    that lapses before its ``for`` ends leaves no trace), so ``pending`` lists none."""

    def __init__(self, detection: Detection, scope: Scope) -> None:
        self.detection, self.scope = detection, scope

    def _json(self, row: AlertRow) -> dict[str, object] | None:
        """The API's shape of a row; a firing alert also counts as silenced when a silence
        made since matches it."""
        alert = live_alert(row)
        if alert is None:
            return None
        if alert.state == AlertState.FIRING and not alert.silenced:
            alert = alert.but(silenced=self.detection.silences.mutes(alert.match_labels))
        return alert_json(alert, row.acked)

    def list_alerts(
        self,
        who: Reader,
        request: Request,
        run: str | None = None,
        state: AlertStates = "open",
        kind: str | None = None,
        severity: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
    ) -> JSON:
        """The latest state of each alert of the caller's projects, newest first; ``since``
        and ``until`` bound its latest transition. A page of ``limit``: the next page's
        cursor is in the ``X-Next-Cursor`` header (and a ``Link``)."""
        query = AlertQuery(
            state,
            run,
            who.projects,
            kind,
            severity,
            seconds("since", since),
            seconds("until", until),
        )
        got = page(lambda at: self.detection.store.current.alerts(query, at, limit), cursor)
        return paged([j for j in map(self._json, got.items) if j is not None], got.cursor, request)

    def groups(
        self,
        who: Reader,
        by: str = "kind,run",
        run: str | None = None,
        state: AlertStates = "open",
        kind: str | None = None,
        severity: str | None = None,
    ) -> JSON:
        """The alerts (the newest 10,000) grouped by the values of ``by`` (labels, ``kind``,
        ``severity``): a burst of 64 stragglers is one group. The most severe group first,
        then the oldest."""
        labels = [k.strip() for k in by.split(",") if k.strip()]
        if not labels:
            raise ApiError(400, "by: give at least one label to group by, e.g. kind,run")
        query = AlertQuery(state, run, who.projects, kind, severity)
        rows = self.detection.store.current.alerts(query, None, GROUPED).items
        shown = {row.id: self._json(row) for row in rows}
        chosen = [a for a in map(live_alert, rows) if a is not None]
        return JSON(
            [
                {
                    "labels": g.labels,
                    "count": len(g.alerts),
                    "severity": g.severity,
                    "since": g.since,
                    "alerts": [shown[a.id] for a in g.alerts],
                }
                for g in group_alerts(chosen[::-1], labels)
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

    def incidents(
        self,
        who: Reader,
        run: str | None = None,
        state: AlertStates = "all",
        since: float | None = None,
        until: float | None = None,
    ) -> JSON:
        """The alerts (the newest 10,000) as incidents, newest first: alerts of one run that
        belong together, their probable causes ranked with the evidence (the first is the
        root cause), whether any of them still fires, and the playbooks its root cause's kind
        triggers with the actions its alerts filed. ``state=open``: incidents with an alert
        open."""
        bounds = seconds("since", since), seconds("until", until)
        query = AlertQuery("all", run, who.projects, None, None, *bounds)
        rows = self.detection.store.current.alerts(query, None, GROUPED).items
        shown = {row.id: j for row in rows if (j := self._json(row)) is not None}
        found = incidents(row for row in rows if row.id in shown)
        listed = []
        for incident in reversed(found):
            live = any(a.open for a in incident.alerts)
            if state == "open" and not live:
                continue
            ranked = incident.causes()
            causes = [
                {"alert": shown[c.alert.id], "evidence": list(c.evidence)} for c in ranked[:3]
            ]
            ids = [a.id for a in incident.alerts]
            playbooks = self.detection.remediation.for_incident(ranked[0].alert.kind, ids)
            listed.append(
                {
                    "id": incident.id,
                    "run": incident.run,
                    "start": incident.start,
                    "last": incident.last,
                    "open": live,
                    "root_cause": causes[0],
                    "causes": causes,
                    "alerts": [shown[a.id] for a in incident.alerts],
                    "playbooks": [p.as_json() for p in playbooks],
                }
            )
        return JSON(with_analyses(self.detection.store, listed))

    async def stream(self, who: Reader, run: str | None = None) -> StreamingResponse:
        """``event: alert`` with the alert's JSON at each transition; a comment every 15 s."""
        return self.detection.streams.response(run, self.scope.hears(who))

    async def ack(self, who: Operator, alert_id: str, body: AckIn) -> JSON:
        """Mark an alert acknowledged (recorded as an event); 404 for an unknown id."""
        return await run_in_threadpool(self._ack, who, alert_id, body)

    def _ack(self, who: Identity, alert_id: str, body: AckIn) -> JSON:
        row = self.detection.store.current.alert(alert_id)
        alert = None if row is None else live_alert(row)
        if row is None or alert is None or not self.scope.sees(who, alert.labels):
            raise ApiError(404, f"unknown alert {alert_id!r}")
        data = {"id": alert_id, "by": who.actor, "comment": body.comment}
        event = Event(self.detection.clock(), ACK_EVENT, body.comment, dict(alert.labels), data)
        self.detection.log.write([event])
        acked = dataclasses.replace(row, acked_at=event.ts, acked_by=who.actor)
        return JSON(self._json(acked))


def alerts_router(detection: Detection, scope: Scope) -> APIRouter:
    """The alerts routes over ``detection``, limited to the caller's projects."""
    alerts = _Alerts(detection, scope)
    router = APIRouter(prefix="/api/v1/alerts")
    router.add_api_route("", alerts.list_alerts, methods=["GET"])
    router.add_api_route("/stream", alerts.stream, methods=["GET"])
    router.add_api_route("/groups", alerts.groups, methods=["GET"])
    router.add_api_route("/stats", alerts.stats, methods=["GET"])
    router.add_api_route("/{alert_id}/ack", alerts.ack, methods=["POST"])
    router.add_api_route("/incidents", alerts.incidents, methods=["GET"])
    return router
