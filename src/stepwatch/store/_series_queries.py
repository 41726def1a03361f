"""The Store's queries over series: which exist, their samples raw or in buckets, their
percentiles and newest values; each on a cursor of its own, compacted rows and the rest."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from typing import Any

import duckdb
import numpy as np

from ..model import SeriesKey
from . import _multi, _percentiles, _prune, _query
from ._catalogue import Catalogue, LabelMatch, SeriesInfo
from ._plan import plan

__all__ = ["SeriesQueries"]


class SeriesQueries:
    """The query half of the Store; it reads through the Store's catalogue and cursors."""

    _cat: Catalogue
    _txn: Callable[[], contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]]
    _snapshot: Callable[
        [], contextlib.AbstractContextManager[tuple[duckdb.DuckDBPyConnection, int]]
    ]

    def series(self, name: str | None = None, match: LabelMatch | None = None) -> list[SeriesInfo]:
        """Stored series with this name (any if None) whose labels equal ``match``."""
        with self._txn() as cur:
            return self._cat.select(cur, name, match)

    def series_info(self, series_id: int) -> SeriesInfo | None:
        """The stored series with this id, or None."""
        with self._txn() as cur:
            key = self._cat.keys_of(cur, [series_id]).get(series_id)
        return None if key is None else SeriesInfo(series_id, key)

    def raw(
        self,
        series_id: int,
        start: float | None = None,
        end: float | None = None,
        limit: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Samples of one series in time order: "ts", "step" (NO_STEP where none), "value"."""
        with self._txn() as cur:
            return _query.raw(cur, series_id, start, end, limit)

    def downsample(
        self, series_id: int, start: float, end: float, points: int
    ) -> dict[str, np.ndarray]:
        """About ``points`` buckets over [start, end], exact min/max/last/count per bucket.

        Buckets lie on a grid of multiples of their width ("ts" is a bucket's
        start, so the first may begin before ``start``); only samples within
        [start, end] count; min and max ignore NaN (NaN when a bucket has only
        NaN); "last" is the value at the latest ts; empty buckets are omitted.
        """
        with self._snapshot() as (cur, watermark):
            p = plan(start, end, points, kept=_prune.read_kept(cur))
            return _query.downsample(cur, series_id, p, watermark)

    def downsample_many(
        self,
        name: str | Sequence[str] | None,
        match: LabelMatch | None,
        start: float,
        end: float,
        points: int,
        fields: Collection[str] = _multi.FIELDS,
    ) -> list[tuple[SeriesInfo, dict[str, np.ndarray]]]:
        """``downsample`` of every matching series in one query, plus each bucket's last "step".

        ``name`` may list several metrics (a page of small multiples asks once); series come
        in the order of the names. ``fields`` picks the columns besides "ts" (only those are
        computed). Series without samples in the range are left out.
        """
        names = [name] if name is None or isinstance(name, str) else list(dict.fromkeys(name))
        with self._snapshot() as (cur, watermark):
            chosen = list(
                {i.id: i for n in names for i in self._cat.select(cur, n, match)}.values()
            )
            p = plan(start, end, points, kept=_prune.read_kept(cur))
            got = _multi.downsample_many(cur, [i.id for i in chosen], p, watermark, fields)
        return [(info, got[info.id]) for info in chosen if info.id in got]

    def percentiles(
        self,
        name: str,
        match: LabelMatch | None,
        start: float,
        end: float,
        points: int,
        qs: Sequence[float] = (0.5, 0.9, 0.99),
        by: str | None = None,
    ) -> list[dict[str, Any]]:
        """Quantiles per bucket of the finite samples of every matching series, per ``by`` value.

        Within 1% of numpy.quantile for values of one sign (log-bucketed
        histograms, see ``_percentiles``); buckets as in ``downsample``.
        One entry per ``by`` value (a single one when ``by`` is None).
        """
        if any(not 0.0 <= q <= 1.0 for q in qs):
            raise ValueError(f"quantiles must lie in [0, 1], got {list(qs)}")
        with self._snapshot() as (cur, watermark):
            chosen = self._cat.select(cur, name, match)
            values, series_lbl, group_lbl = _percentiles.label_maps(cur, self._cat, chosen, by)
            p = plan(start, end, points, kept=_prune.read_kept(cur))
            hist = _percentiles.histogram(cur, p, watermark, series_lbl, group_lbl)
        return _percentiles.entries(values, by, p, _percentiles.quantiles(hist, qs))

    def latest(
        self, name: str | None = None, match: LabelMatch | None = None
    ) -> list[tuple[SeriesKey, float, int, float]]:
        """(key, ts, step, value) of the newest sample of each matching series that has one."""
        with self._snapshot() as (cur, watermark):
            return _latest(cur, watermark, self._cat.select(cur, name, match))

    def latest_of(self, chosen: Sequence[SeriesInfo]) -> list[tuple[SeriesKey, float, int, float]]:
        """``latest`` of these series."""
        with self._snapshot() as (cur, watermark):
            return _latest(cur, watermark, chosen)


def _latest(
    cur: duckdb.DuckDBPyConnection, watermark: int, chosen: Sequence[SeriesInfo]
) -> list[tuple[SeriesKey, float, int, float]]:
    keys = {i.id: i.key for i in chosen}
    rows = _query.latest(cur, list(keys), watermark)
    return [(keys[sid], ts, step, value) for sid, ts, step, value in rows]
