"""Query routes: series lookup, raw samples, downsampled views, percentiles, latest, events."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Query

from ..auth import Identity
from ..model import MAX_INT64, RECORD_KINDS
from ..store import SeriesInfo, Store
from ..wire import json_number
from ._auth import Reader
from ._errors import ApiError
from ._jsonio import JSON, clean, column
from ._params import metric_name, quantiles, time_range
from ._params import points as check_points
from ._scope import Scope

__all__ = ["query_router"]

Labels = Annotated[list[str] | None, Query(description="label filter key:value, repeatable")]
Limit = Annotated[int | None, Query(ge=1, le=MAX_INT64)]


#: A series id is its collector's: in a fleet, the run takes the request to the collector that
#: holds it (and a series of another run is unknown).
SeriesRun = Annotated[
    str | None,
    Query(description="the series' run: in a fleet, the request goes to the run's collector"),
]


def _series_json(info: SeriesInfo) -> dict[str, Any]:
    return {"id": info.id, "name": info.key.name, "labels": dict(info.key.labels)}


def _lookup(scope: Scope, who: Identity, series_id: int, run: str | None) -> SeriesInfo:
    """The series with this id (of ``run``, when given), or 404 (a series of another project's
    run included)."""
    info = scope.store.series_info(series_id)
    if info is None or not scope.sees(who, dict(info.key.labels)):
        raise ApiError(404, f"unknown series {series_id}")
    if run is not None and info.key.label("run") != run:
        raise ApiError(404, f"unknown series {series_id} of run {run!r}")
    return info


def _extent(
    store: Store, infos: list[SeriesInfo], start: float | None, end: float | None
) -> tuple[float, float] | None:
    """The requested range with missing ends filled from the data; None when nothing is in it."""
    time_range(start, end)
    if start is None:
        firsts = [store.raw(i.id, limit=1)["ts"] for i in infos]
        start = min((float(f[0]) for f in firsts if f.size), default=None)
    if end is None:
        end = max((ts for _, ts, _, _ in store.latest_of(infos)), default=None)
    if start is None or end is None or end < start:
        return None
    return start, end


def _columns(data: dict[str, np.ndarray]) -> dict[str, list[Any]]:
    return {name: column(values) for name, values in data.items()}


def _group_json(group: dict[str, Any]) -> dict[str, Any]:
    return {
        "labels": group["labels"],
        "ts": column(group["ts"]),
        "count": column(group["count"]),
        "q": {str(q): column(values) for q, values in group["q"].items()},
    }


_EMPTY_DOWNSAMPLE = {
    "ts": np.empty(0),
    "min": np.empty(0),
    "max": np.empty(0),
    "last": np.empty(0),
    "count": np.empty(0, np.int64),
}


class _Queries:
    """The read side of the API; each method is one route (FastAPI reads its parameters)."""

    def __init__(self, scope: Scope) -> None:
        self.scope, self.store = scope, scope.store

    def series(
        self, who: Reader, name: str | None = None, run: str | None = None, label: Labels = None
    ) -> JSON:
        """Series by name and labels: ``?name=train.loss&run=r1&label=node:node0``."""
        found = self.store.series(metric_name(name), self.scope.match(who, run, label))
        return JSON([_series_json(info) for info in found])

    def raw(
        self,
        who: Reader,
        series: int,
        start: float | None = None,
        end: float | None = None,
        limit: Limit = None,
        run: SeriesRun = None,
    ) -> JSON:
        """Every sample of one series in [start, end], in time order."""
        info = _lookup(self.scope, who, series, run)
        time_range(start, end)
        data = self.store.raw(series, start, end, limit)
        return JSON({**_series_json(info), **_columns(data)})

    def downsample(
        self,
        who: Reader,
        series: int,
        start: float | None = None,
        end: float | None = None,
        points: int = 1000,
        run: SeriesRun = None,
    ) -> JSON:
        """Min/max/last/count per bucket, about ``points`` buckets over the range."""
        info = _lookup(self.scope, who, series, run)
        n = check_points(points)
        span = _extent(self.store, [info], start, end)
        data = self.store.downsample(series, *span, n) if span else _EMPTY_DOWNSAMPLE
        return JSON({**_series_json(info), **_columns(data)})

    def percentiles(
        self,
        who: Reader,
        name: str,
        run: str | None = None,
        label: Labels = None,
        start: float | None = None,
        end: float | None = None,
        points: int = 200,
        q: str = "0.5,0.9,0.99",
        by: str | None = None,
    ) -> JSON:
        """Quantiles per bucket over every matching series, one entry per value of ``by``."""
        metric, match = metric_name(name), self.scope.match(who, run, label)
        qs, n = quantiles(q), check_points(points)
        span = _extent(self.store, self.store.series(metric, match), start, end)
        groups = self.store.percentiles(metric, match, *span, n, qs, by) if span else []
        return JSON([_group_json(g) for g in groups])

    def latest(
        self, who: Reader, name: str | None = None, run: str | None = None, label: Labels = None
    ) -> JSON:
        """The newest sample of every matching series."""
        rows = self.store.latest(metric_name(name), self.scope.match(who, run, label))
        return JSON(
            [
                {**key.as_dict(), "ts": ts, "step": step, "value": json_number(value)}
                for key, ts, step, value in rows
            ]
        )

    def events(
        self,
        who: Reader,
        run: str | None = None,
        kind: str | None = None,
        start: float | None = None,
        end: float | None = None,
        limit: Annotated[int, Query(ge=1, le=100_000)] = 1000,
    ) -> JSON:
        """The newest ``limit`` matching events, oldest first: what producers sent and the
        collector's own records (alerts, silences, audit...), each kind read from its own table."""
        time_range(start, end)
        where = (run, kind, start, end, limit, self.scope.runs_of(who))
        if kind in RECORD_KINDS:
            found = self.store.records(*where)
        elif kind is not None:
            found = self.store.events(*where)
        else:
            both = self.store.events(*where) + self.store.records(*where)
            found = sorted(both, key=lambda e: e.ts)[-limit:]
        return JSON([clean(e.as_dict()) for e in found])


def query_router(scope: Scope) -> APIRouter:
    """The read side of the API over ``scope``'s store, limited to the caller's projects."""
    queries = _Queries(scope)
    router = APIRouter(prefix="/api/v1")
    router.add_api_route("/series", queries.series, methods=["GET"])
    for name in ("raw", "downsample", "percentiles", "latest"):
        router.add_api_route(f"/query/{name}", getattr(queries, name), methods=["GET"])
    router.add_api_route("/events", queries.events, methods=["GET"])
    return router
