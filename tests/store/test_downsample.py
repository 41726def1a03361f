"""downsample(): exact min/max/last/count per bucket, whatever mix of tier and raw rows answers."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepwatch.model import SeriesKey
from stepwatch.store import Store
from stepwatch.store._plan import plan

from .conftest import T0, batch

KEYS = [SeriesKey.of("loss", {"run": "r1"}), SeriesKey.of("loss", {"run": "r2"})]
Columns = dict[str, np.ndarray]


def _dataset(rng: np.random.Generator, n: int, span: float) -> Columns:
    """Random samples of two series; NaN, +-Inf and repeated timestamps included."""
    ts = T0 + rng.uniform(0, span, n)
    ts[rng.integers(0, n, n // 50)] = ts[rng.integers(0, n, n // 50)]
    value = rng.normal(size=n)
    value[rng.random(n) < 0.05] = math.nan
    value[rng.integers(0, n, 5)] = math.inf
    value[rng.integers(0, n, 5)] = -math.inf
    return {"series": rng.integers(0, 2, n), "ts": ts, "value": value}


def _apply(store: Store, data: Columns, lo: int, hi: int, seq: int) -> None:
    store.apply(
        [batch(KEYS, data["series"][lo:hi], data["ts"][lo:hi], data["value"][lo:hi], seq=seq)]
    )


def _reference(data: Columns, sid: int, start: float, end: float, points: int) -> Columns:
    """What downsample must return, computed sample by sample."""
    p = plan(start, end, points)
    order = np.arange(data["ts"].shape[0])
    sel = (data["series"] == sid) & (data["ts"] >= start) & (data["ts"] <= end)
    ts, value, order = data["ts"][sel], data["value"][sel], order[sel]
    bucket = np.floor((ts - p.origin) / p.width)
    out: dict[str, list[float]] = {k: [] for k in ("ts", "min", "max", "last", "count")}
    for b in np.unique(bucket):
        i = bucket == b
        finite = value[i][~np.isnan(value[i])]
        newest = np.lexsort((order[i], ts[i]))[-1]
        out["ts"].append(p.origin + b * p.width)
        out["min"].append(finite.min() if finite.size else math.nan)
        out["max"].append(finite.max() if finite.size else math.nan)
        out["last"].append(value[i][newest])
        out["count"].append(int(i.sum()))
    return {k: np.array(v) for k, v in out.items()}


def _assert_same(got: Columns, want: Columns) -> None:
    assert list(got) == ["ts", "min", "max", "last", "count"]
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


QUERIES = [
    (T0, T0 + 200_000, 2000),  # 100 s buckets: 10 s tier
    (T0 + 3.3, T0 + 150_007.7, 50),  # 3000 s buckets: 300 s tier, ragged edges
    (T0 + 1234.5, T0 + 1534.5, 100),  # 3 s buckets: raw samples only
    (T0 - 500.0, T0 + 250_000, 7),
    (T0 + 777.0, T0 + 777.0, 10),  # an instant
]


def test_exact_before_and_after_compaction_and_across_the_watermark(store: Store) -> None:
    data = _dataset(np.random.default_rng(7), 30_000, 200_000)
    late = _dataset(np.random.default_rng(8), 3_000, 200_000)  # lands in compacted buckets
    _apply(store, data, 0, 10_000, 1)
    _apply(store, data, 10_000, 20_000, 2)
    phases = []
    for step in ("raw", "compacted", "mixed"):
        if step == "compacted":
            store.compact()
        if step == "mixed":
            _apply(store, data, 20_000, 30_000, 3)
            data = {k: np.concatenate([data[k], late[k]]) for k in data}
            _apply(store, late, 0, 3_000, 4)
        seen = data["ts"].shape[0] if step == "mixed" else 20_000
        known = {k: v[:seen] for k, v in data.items()}
        for sid in (0, 1):
            for start, end, points in QUERIES:
                got = store.downsample(sid, start, end, points)
                _assert_same(got, _reference(known, sid, start, end, points))
        phases.append(store.stats()["uncompacted"])
    assert phases == [20_000, 0, 13_000]


def test_about_the_asked_number_of_buckets(store: Store) -> None:
    ts = T0 + np.arange(0, 100_000, 0.5)
    store.apply([batch(KEYS[:1], np.zeros(ts.shape[0], int), ts, np.sin(ts))])
    store.compact()
    for points in (1, 10, 333, 2000):
        n = store.downsample(0, T0, T0 + 100_000, points)["ts"].shape[0]
        assert points / 2 <= n <= points + 1


def test_an_unknown_series_or_empty_range_gives_empty_columns(store: Store) -> None:
    got = store.downsample(99, T0, T0 + 10, 5)
    assert all(v.shape == (0,) for v in got.values())
    assert got["count"].dtype == np.int64 and got["min"].dtype == np.float64


def test_bad_ranges_are_rejected(store: Store) -> None:
    with pytest.raises(ValueError):
        store.downsample(0, T0 + 10, T0, 5)
    with pytest.raises(ValueError):
        store.downsample(0, T0, T0 + 10, 0)
    with pytest.raises(ValueError):
        store.downsample(0, T0, math.inf, 10)


_values = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1.0])
_sample = st.tuples(st.integers(0, 1), st.integers(0, 3000), st.sampled_from([0.0, 0.25]), _values)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    samples=st.lists(_sample, min_size=1, max_size=60),
    split=st.floats(0, 1),
    bounds=st.tuples(st.integers(-100, 3100), st.integers(-100, 3100)),
    points=st.integers(1, 40),
)
def test_downsample_invariants(
    samples: list[tuple[int, int, float, float]],
    split: float,
    bounds: tuple[int, int],
    points: int,
) -> None:
    series, whole, frac, value = (np.array(c) for c in zip(*samples, strict=True))
    data = {"series": series, "ts": T0 + whole + frac, "value": value.astype(np.float64)}
    start, end = T0 + min(bounds), T0 + max(bounds)
    cut = int(split * len(samples))
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.duckdb") as store:
        _apply(store, data, 0, cut, 1)
        store.compact()
        _apply(store, data, cut, len(samples), 2)
        mixed = store.downsample(0, start, end, points)
        store.compact()
        full = store.downsample(0, start, end, points)
    _assert_same(mixed, full)  # compaction never changes an answer
    _assert_same(full, _reference(data, 0, start, end, points))
    width = plan(start, end, points).width
    assert np.all(np.diff(full["ts"]) > 0)
    assert np.all((full["ts"] <= end) & (full["ts"] + width > start))
    both = ~np.isnan(full["min"])
    assert np.all(full["min"][both] <= full["max"][both])
