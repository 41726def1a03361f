"""What the dashboard needs beyond the query API: run summaries, log search, many-series charts."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Query

from ..model import NO_STEP
from ..store import RunSummary
from ._auth import Reader
from ._errors import ApiError
from ._jsonio import JSON, clean, column
from ._params import metric_name, time_range
from ._params import points as check_points
from ._scope import Scope

__all__ = ["dashboard_router"]

Labels = Annotated[list[str] | None, Query(description="label filter key:value, repeatable")]
Names = Annotated[list[str] | None, Query(description="metric name, repeatable")]
#: Log levels the tailer detects, lower case.
LEVELS = ("debug", "info", "warning", "error", "critical")
#: The columns /query/multi can send per series, besides ts.
FIELDS = ("min", "max", "last", "step", "count")


def _summary_json(s: RunSummary) -> dict[str, Any]:
    return clean(
        {
            **s.run.as_dict(),
            "last_ts": s.last_ts,
            "step": s.step,
            "progress": s.progress,
            "steps_per_s": s.steps_per_s,
            "eta_s": s.eta_s,
            "eta_s_p10": s.eta_s_p10,
            "eta_s_p90": s.eta_s_p90,
            "final_loss_p10": s.final_loss_p10,
            "final_loss_p50": s.final_loss_p50,
            "final_loss_p90": s.final_loss_p90,
            "success_probability": s.success_probability,
            "loss": s.loss,
            "tokens_per_s": s.tokens_per_s,
            "open_alerts": s.open_alerts,
            "dropped_samples": s.dropped_samples,
        }
    )


def _field(data: dict[str, np.ndarray], name: str) -> list[Any]:
    if name == "step":
        return [None if s == NO_STEP else s for s in data["step"].tolist()]
    return column(data[name])


class _Dashboard:
    """The routes over one store; each method is one route (FastAPI reads its parameters)."""

    def __init__(self, scope: Scope) -> None:
        self.scope, self.store = scope, scope.store

    def summary(
        self,
        who: Reader,
        run: str | None = None,
        project: str | None = None,
        status: str | None = None,
    ) -> JSON:
        """Every run (or one: only that one is computed) of the caller's projects with
        progress, steps/s, ETA, loss, tokens/s, last update, open alerts and the samples its
        producers dropped (spools full). While a running run has a current forecast (made
        every few seconds beside detection), the ETA is the forecast's, pauses to come
        included, with its p10-p90, beside the final loss forecast and the chance the run
        ends well; else the ETA is the steps left at the recent pace, and the rest null."""
        found = self.store.run_summaries(project, status, run=run, projects=who.projects)
        return JSON([_summary_json(s) for s in found])

    def logs(
        self,
        who: Reader,
        run: str | None = None,
        q: str | None = None,
        node: str | None = None,
        rank: str | None = None,
        level: str | None = None,
        start: float | None = None,
        end: float | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 500,
    ) -> JSON:
        """The newest ``limit`` log lines holding ``q`` and passing the filters, oldest first."""
        time_range(start, end)
        if level is not None and level.lower() not in LEVELS:
            raise ApiError(400, f"level must be one of {', '.join(LEVELS)}")
        found = self.store.logs(
            run=run,
            runs=self.scope.runs_of(who),
            text=q or None,
            node=node,
            rank=rank,
            level=level,
            start=start,
            end=end,
            limit=limit,
        )
        return JSON([clean(e.as_dict()) for e in found])

    def multi(
        self,
        who: Reader,
        start: float,
        end: float,
        name: Names = None,
        run: str | None = None,
        label: Labels = None,
        points: int = 300,
        fields: str = ",".join(FIELDS),
    ) -> JSON:
        """Min/max/last/step/count per bucket of every matching series, in one query.

        ``name`` repeats (a page of small multiples asks for all its metrics at once);
        ``fields`` picks the columns sent besides ``ts`` (small multiples need only ``last``).
        """
        time_range(start, end)
        n = check_points(points)
        wanted = [f for f in fields.split(",") if f]
        if not wanted or not set(wanted) <= set(FIELDS):
            raise ApiError(400, f"fields must be a comma list of {', '.join(FIELDS)}")
        names = None if not name else [metric_name(x) for x in name]
        match = self.scope.match(who, run, label)
        found = self.store.downsample_many(names, match, start, end, n, wanted)
        return JSON(
            {
                "start": start,
                "end": end,
                "series": [
                    {
                        "id": info.id,
                        "name": info.key.name,
                        "labels": dict(info.key.labels),
                        "ts": column(data["ts"]),
                        **{f: _field(data, f) for f in wanted},
                    }
                    for info, data in found
                ],
            }
        )


def dashboard_router(scope: Scope) -> APIRouter:
    """The dashboard's routes; include it before the runs router (``/runs/summary``)."""
    dash = _Dashboard(scope)
    router = APIRouter(prefix="/api/v1")
    router.add_api_route("/runs/summary", dash.summary, methods=["GET"])
    router.add_api_route("/logs", dash.logs, methods=["GET"])
    router.add_api_route("/query/multi", dash.multi, methods=["GET"])
    return router
