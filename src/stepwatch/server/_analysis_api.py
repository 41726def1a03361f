"""Incident analysis API: what the analyst model said of an incident, and asking it (again).

The analysis is the model's, marked so; a playbook it suggests is only shown (a person
requests it through the actions API, where its approval applies). Without ``--analyst`` the
first route still shows what an earlier life kept, and asking answers 409.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from ..auth import Identity
from ..store import Store
from ._analyst import Analyst, find_incident
from ._auth import Operator, Reader
from ._errors import ApiError, error_responses
from ._jsonio import JSON
from ._scope import Scope

__all__ = ["analysis_router", "with_analyses"]

log = logging.getLogger("stepwatch.server")


def with_analyses(store: Store, listed: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """The incidents of ``listed`` (the incidents list's shape), each with its analysis in
    ``analysis`` when the analyst made one (the others unchanged)."""
    kept = store.analyses.of_incidents([str(i["id"]) for i in listed])
    for incident in listed:
        analysis = kept.get(str(incident["id"]))
        if analysis is not None and analysis.done:
            incident["analysis"] = analysis.as_json()
    return listed


def _unknown(incident_id: str) -> ApiError:
    """The answer to an id the caller sees no incident of, whether or not there is one."""
    return ApiError(404, f"unknown incident {incident_id!r}")


class _Analysis:
    """The analysis routes over the store's analyses and the collector's analyst (None:
    none configured); each method is one route."""

    def __init__(self, analyst: Analyst | None, scope: Scope) -> None:
        self.analyst, self.scope = analyst, scope

    def get(self, who: Reader, incident_id: str) -> JSON:
        """The incident's analysis (``analysis``: null while there is none), whether one is
        under way (``state``: done, asked, failed or none) and the failed tries so far."""
        # An incident's id is its first alert's, whose labels say whose it is: no grouping.
        row = self.scope.store.current.alert(incident_id)
        if row is None or not self.scope.sees(who, row.labels):
            raise _unknown(incident_id)
        kept = self.scope.store.analyses.get(incident_id)
        if self.analyst is not None and self.analyst.asked(incident_id):
            state = "asked"
        elif kept is not None:
            state = "done" if kept.done else "failed"
        elif find_incident(self.scope.store, incident_id) is None:
            raise _unknown(incident_id)  # never analysed: only grouping tells it is an incident
        else:
            state = "none"
        return JSON(
            {
                "incident": incident_id,
                "state": state,
                "analysis": kept.as_json() if kept is not None and kept.done else None,
                "tries": 0 if kept is None else kept.tries,
                "error": "" if kept is None else kept.error,
            }
        )

    async def ask(self, who: Operator, incident_id: str) -> JSON:
        """Have the analyst analyse the incident (again) now; 409 without an analyst, 503
        when too many asks wait."""
        return await run_in_threadpool(self._ask, who, incident_id)

    def _ask(self, who: Identity, incident_id: str) -> JSON:
        incident = find_incident(self.scope.store, incident_id)
        if incident is None or not self.scope.sees(who, incident.alerts[0].labels):
            raise _unknown(incident_id)
        if self.analyst is None:
            raise ApiError(409, "this collector has no analyst: start it with --analyst URL")
        if not self.analyst.ask(incident):
            raise ApiError(503, "too many incidents wait for the analyst: ask again later")
        log.info("%s asked the analyst about incident %s", who.actor, incident_id)
        return JSON({"incident": incident_id, "state": "asked"}, status_code=202)


def analysis_router(analyst: Analyst | None, scope: Scope) -> APIRouter:
    """The analysis routes, limited to the caller's projects."""
    analysis = _Analysis(analyst, scope)
    router = APIRouter(prefix="/api/v1/alerts/incidents/{incident_id}")
    router.add_api_route("/analysis", analysis.get, methods=["GET"])
    router.add_api_route(
        "/analysis", analysis.ask, methods=["POST"], status_code=202,
        responses=error_responses(409, 503),
    )  # fmt: skip
    return router
