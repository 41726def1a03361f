"""downsample_many(): per series the same buckets as downsample(), plus each bucket's last step,
whether tier rows, raw edges or rows past the watermark answer."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from stepwatch.model import NO_STEP, SeriesKey
from stepwatch.store import Store
from stepwatch.store._plan import plan

from .conftest import T0, batch

KEYS = [SeriesKey.of("gpu.util_pct", {"run": "r1", "node": "n0", "gpu": g}) for g in range(3)] + [
    SeriesKey.of("gpu.util_pct", {"run": "r2", "node": "n0", "gpu": 0})
]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """Four series over two hours: the first 6,000 rows compacted into tiers, the rest not."""
    rng = np.random.default_rng(3)
    n = 8_000
    series = rng.integers(0, len(KEYS), n)
    ts = np.sort(T0 + rng.uniform(0, 7200, n))
    value = rng.normal(50, 10, n)
    value[rng.random(n) < 0.03] = math.nan
    step = np.arange(n, dtype=np.int64)
    step[series == 3] = NO_STEP
    opened = Store(tmp_path / "s.duckdb")
    opened.apply([batch(KEYS, series[:6000], ts[:6000], value[:6000], step=step[:6000])])
    opened.compact()
    opened.apply([batch(KEYS, series[6000:], ts[6000:], value[6000:], step=step[6000:], seq=2)])
    return opened


@pytest.mark.parametrize(
    ("start", "end", "points"),
    [(T0, T0 + 7200, 100), (T0 + 13.7, T0 + 6999.2, 37), (T0 + 5000.5, T0 + 7100, 500)],
)
def test_each_series_matches_downsample(
    store: Store, start: float, end: float, points: int
) -> None:
    with store:
        got = store.downsample_many("gpu.util_pct", {"run": "r1"}, start, end, points)
        assert [info.key for info, _ in got] == KEYS[:3]
        for info, data in got:
            alone = store.downsample(info.id, start, end, points)
            for col in ("ts", "min", "max", "last", "count"):
                np.testing.assert_array_equal(data[col], alone[col], err_msg=col)
            raw = store.raw(info.id, start, end)
            width = plan(start, end, points).width
            for t, step in zip(data["ts"], data["step"], strict=True):
                inside = (raw["ts"] >= t) & (raw["ts"] < t + width)
                assert step == raw["step"][inside][-1]  # the step of the bucket's newest sample


def test_series_without_steps_or_samples(store: Store) -> None:
    with store:
        ((info, data),) = store.downsample_many("gpu.util_pct", {"run": "r2"}, T0, T0 + 7200, 10)
        assert info.key == KEYS[3]
        assert (data["step"] == NO_STEP).all()
        assert store.downsample_many("gpu.util_pct", {"run": "r1"}, T0 - 100, T0 - 1, 10) == []
        assert store.downsample_many("gpu.temp_c", None, T0, T0 + 7200, 10) == []


def test_several_names_in_one_query(tmp_path: Path) -> None:
    keys = [SeriesKey.of(name, {"run": "r1", "gpu": g}) for name in ("a", "b") for g in (0, 1)]
    keys.append(SeriesKey.of("c", {"run": "r1"}))
    series = np.tile(np.arange(len(keys), dtype=np.int64), 100)
    ts = T0 + np.repeat(np.arange(100, dtype=np.float64), len(keys))
    value = np.arange(series.size, dtype=np.float64)
    with Store(tmp_path / "s.duckdb") as store:
        store.apply([batch(keys, series, ts, value)])
        got = store.downsample_many(["b", "a", "b"], {"run": "r1"}, T0, T0 + 100, 10)
        assert [info.key for info, _ in got] == keys[2:4] + keys[0:2]  # names in the order given
        for info, data in got:
            alone = store.downsample(info.id, T0, T0 + 100, 10)
            np.testing.assert_array_equal(data["last"], alone["last"])
        assert store.downsample_many([], None, T0, T0 + 100, 10) == []


@pytest.mark.parametrize("fields", [("last",), ("max",), ("step", "count"), ("min", "last")])
def test_only_the_fields_asked_for(store: Store, fields: tuple[str, ...]) -> None:
    with store:
        full = store.downsample_many("gpu.util_pct", None, T0 + 13.7, T0 + 6999.2, 37)
        part = store.downsample_many("gpu.util_pct", None, T0 + 13.7, T0 + 6999.2, 37, fields)
        assert [info for info, _ in part] == [info for info, _ in full]
        for (_, got), (_, want) in zip(part, full, strict=True):
            assert set(got) == {"ts", *fields}
            for col in got:
                np.testing.assert_array_equal(got[col], want[col], err_msg=col)
