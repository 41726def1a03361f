"""Query routes: series lookup, raw samples, downsampled views, percentiles, latest, events."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Query

from ..store import SeriesInfo, Store
from ..wire import json_number
from ._errors import ApiError
from ._jsonio import JSON, clean, column
from ._params import label_match, metric_name, quantiles, time_range
from ._params import points as check_points

__all__ = ["query_router"]

Labels = Annotated[list[str] | None, Query(description="label filter key:value, repeatable")]
Limit = Annotated[int | None, Query(ge=1)]


def _series_json(info: SeriesInfo) -> dict[str, Any]:
    return {"id": info.id, "name": info.key.name, "labels": dict(info.key.labels)}


def _lookup(store: Store, series_id: int) -> SeriesInfo:
    """The series with this id, or 404."""
    for info in store.series():
        if info.id == series_id:
            return info
    raise ApiError(404, f"unknown series {series_id}")


def _extent(
    store: Store, infos: list[SeriesInfo], start: float | None, end: float | None
) -> tuple[float, float] | None:
    """The requested range with missing ends filled from the data; None when nothing is in it."""
    time_range(start, end)
    if start is None:
        firsts = [store.raw(i.id, limit=1)["ts"] for i in infos]
        start = min((float(f[0]) for f in firsts if f.size), default=None)
    if end is None:
        wanted = {i.key for i in infos}
        names = {i.key.name for i in infos}
        lasts = [ts for n in names for key, ts, _, _ in store.latest(n) if key in wanted]
        end = max(lasts, default=None)
    if start is None or end is None or end < start:
        return None
    return start, end


def _columns(data: dict[str, np.ndarray]) -> dict[str, list[Any]]:
    return {name: column(values) for name, values in data.items()}


def query_router(store: Store) -> APIRouter:
    """The read side of the API over ``store``."""
    router = APIRouter(prefix="/api/v1")

    @router.get("/series")
    def series(name: str | None = None, run: str | None = None, label: Labels = None) -> JSON:
        """Series by name and labels: ``?name=train.loss&run=r1&label=node:node0``."""
        found = store.series(metric_name(name), label_match(run, label))
        return JSON([_series_json(info) for info in found])

    @router.get("/query/raw")
    def raw(
        series: int, start: float | None = None, end: float | None = None, limit: Limit = None
    ) -> JSON:
        """Every sample of one series in [start, end], in time order."""
        info = _lookup(store, series)
        time_range(start, end)
        return JSON({**_series_json(info), **_columns(store.raw(series, start, end, limit))})

    @router.get("/query/downsample")
    def downsample(
        series: int, start: float | None = None, end: float | None = None, points: int = 1000
    ) -> JSON:
        """Min/max/last/count per bucket, about ``points`` buckets over the range."""
        info = _lookup(store, series)
        n = check_points(points)
        span = _extent(store, [info], start, end)
        data = store.downsample(series, *span, n) if span else _EMPTY_DOWNSAMPLE
        return JSON({**_series_json(info), **_columns(data)})

    @router.get("/query/percentiles")
    def percentiles(
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
        metric, match, qs, n = (
            metric_name(name),
            label_match(run, label),
            quantiles(q),
            check_points(points),
        )
        assert metric is not None
        span = _extent(store, store.series(metric, match), start, end)
        groups = store.percentiles(metric, match, *span, n, qs, by) if span else []
        return JSON(
            [
                {
                    "labels": g["labels"],
                    "ts": column(g["ts"]),
                    "count": column(g["count"]),
                    "q": {str(k): column(v) for k, v in g["q"].items()},
                }
                for g in groups
            ]
        )

    @router.get("/query/latest")
    def latest(name: str | None = None, run: str | None = None, label: Labels = None) -> JSON:
        """The newest sample of every matching series."""
        rows = store.latest(metric_name(name), label_match(run, label))
        return JSON(
            [
                {**key.as_dict(), "ts": ts, "step": step, "value": json_number(value)}
                for key, ts, step, value in rows
            ]
        )

    @router.get("/events")
    def events(
        run: str | None = None,
        kind: str | None = None,
        start: float | None = None,
        end: float | None = None,
        limit: Annotated[int, Query(ge=1, le=100_000)] = 1000,
    ) -> JSON:
        """The newest ``limit`` matching events, oldest first."""
        time_range(start, end)
        found = store.events(run=run, kind=kind, start=start, end=end, limit=limit)
        return JSON([clean(e.as_dict()) for e in found])

    return router


_EMPTY_DOWNSAMPLE = {
    "ts": np.empty(0),
    "min": np.empty(0),
    "max": np.empty(0),
    "last": np.empty(0),
    "count": np.empty(0, np.int64),
}
