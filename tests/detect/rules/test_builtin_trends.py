"""The built-in pack on slow faults and fast ones: leaks over hours and within minutes, disks
that fill over a day, GPUs that heat by degrees an hour; through lost samples and gaps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from stepwatch.detect import Alert, Engine, builtin_rules
from stepwatch.model import NO_STEP, SampleBatch, SeriesKey

HOUR = 3600.0
HOST_TOTAL = 1024.0**4  # 1 TiB
NODE = {"run": "r", "node": "n0"}


@dataclass(frozen=True)
class Series:
    name: str
    ts: np.ndarray
    value: np.ndarray
    labels: tuple[tuple[str, str], ...] = tuple(NODE.items())


def _replay(*series: Series, batch_s: float = 60.0) -> list[Alert]:
    """The built-in pack over the series, a batch per ``batch_s`` of data time."""
    keys = [SeriesKey.of(s.name, dict(s.labels)) for s in series]
    ts = np.concatenate([s.ts for s in series])
    index = np.concatenate([np.full(s.ts.size, i, np.uint32) for i, s in enumerate(series)])
    value = np.concatenate([s.value for s in series])
    order = np.argsort(ts, kind="stable")
    ts, index, value = ts[order], index[order], value[order]
    engine, alerts = Engine(builtin_rules()), []
    cuts = np.searchsorted(ts, np.arange(ts[0], ts[-1] + batch_s, batch_s), side="left")
    for seq, (a, b) in enumerate(zip(cuts[:-1], np.append(cuts[1:-1], ts.size), strict=True)):
        if a < b:
            steps = np.full(b - a, NO_STEP, np.int64)
            batch = SampleBatch("t", seq, keys, index[a:b], ts[a:b], steps, value[a:b], [])
            alerts += engine.process(batch)
    return alerts


def _fired(alerts: list[Alert], kind: str | None = None) -> list[Alert]:
    return [a for a in alerts if a.state == "firing" and kind in (None, a.kind)]


def _lossy(ts: np.ndarray, seed: int, gap_at: float) -> np.ndarray:
    """Which samples arrive: 5 % lost at random, a 30 s burst lost every 20 minutes, and the
    agent silent for 90 s from ``gap_at``."""
    rng = np.random.default_rng(seed)
    burst = (ts % 1200.0) < 30.0
    gap = (ts >= gap_at) & (ts < gap_at + 90.0)
    return (rng.random(ts.size) >= 0.05) & ~burst & ~gap


def _host(ts: np.ndarray, used: np.ndarray, keep: np.ndarray | None = None) -> list[Series]:
    keep = np.ones(ts.size, bool) if keep is None else keep
    total = np.full(ts.size, HOST_TOTAL)
    return [
        Series("host.mem_used_bytes", ts[keep], used[keep]),
        Series("host.mem_total_bytes", ts[keep], total[keep]),
    ]


def _noise(ts: np.ndarray, seed: int) -> np.ndarray:
    """A real reading's noise: 0.2 % of the total, with Student-t(3) tails."""
    return 0.002 * HOST_TOTAL * np.random.default_rng(seed).standard_t(3, ts.size) / np.sqrt(3)


@pytest.mark.parametrize("messy", [False, True])
@pytest.mark.parametrize(("rate", "within_min"), [(0.05, 60), (0.06, 50)])
@pytest.mark.parametrize("base", [0.25, 0.5])
def test_a_slow_leak_from_five_percent_an_hour_is_found_within_the_hour(
    rate: float, within_min: float, base: float, messy: bool
) -> None:
    ts = 5.0 * np.arange(int(4 * HOUR / 5))  # 4 hours, the leak from the first hour's end
    hours = np.clip(ts - HOUR, 0.0, None) / HOUR
    used = base * HOST_TOTAL * (1 + rate) ** hours + _noise(ts, int(rate * 100))
    keep = _lossy(ts, 3, gap_at=1.3 * HOUR) if messy else None
    alerts = _replay(*_host(ts, used, keep))
    (leak,) = _fired(alerts, "host_memory_leak")
    assert leak.rule.alert == "host_memory_leak"
    assert HOUR < leak.ts <= HOUR + within_min * 60


def _sawtooth(ts: np.ndarray, period_s: float, swing: float, seed: int) -> np.ndarray:
    """Memory that rises by ``swing`` of the total over each (jittered) period and drops back,
    as a garbage collector or a page cache does."""
    rng = np.random.default_rng(seed)
    phase = np.cumsum(rng.uniform(0.5, 1.5, ts.size) * np.diff(ts, prepend=ts[0])) / period_s
    return (0.35 + swing * (phase % 1.0)) * HOST_TOTAL + _noise(ts, seed)


@pytest.mark.parametrize(("period_s", "swing"), [(60, 0.05), (300, 0.03), (900, 0.02)])
def test_flat_or_sawtooth_memory_raises_nothing(period_s: float, swing: float) -> None:
    ts = 5.0 * np.arange(int(6 * HOUR / 5))
    flat = 0.35 * HOST_TOTAL + _noise(ts, 11)
    assert _fired(_replay(*_host(ts, flat))) == []
    keep = _lossy(ts, 12, gap_at=2 * HOUR)
    assert _fired(_replay(*_host(ts, _sawtooth(ts, period_s, swing, 13), keep))) == []


@pytest.mark.parametrize("messy", [False, True])
@pytest.mark.parametrize(("fill_min", "within_min"), [(3, 2.0), (5, 2.5), (10, 4.5)])
def test_memory_that_fills_within_minutes_is_found_before_it_is_full(
    fill_min: float, within_min: float, messy: bool
) -> None:
    start = 1200.0
    ts = 5.0 * np.arange(int(start / 5) + 12 * fill_min)
    fraction = 0.4 + 0.6 * np.clip((ts - start) / (fill_min * 60), 0.0, 1.0)
    used = np.minimum(fraction * HOST_TOTAL + _noise(ts, 21), HOST_TOTAL)
    keep = _lossy(ts, 22, gap_at=600.0) if messy else None
    alerts = _replay(*_host(ts, used, keep), batch_s=10.0)
    (filling,) = _fired(alerts, "host_memory_leak")
    assert filling.rule.alert == "host_memory_filling" and filling.rule.severity == "critical"
    assert start < filling.ts <= start + within_min * 60


def test_a_run_that_loads_a_fifth_of_memory_at_once_is_not_filling_it() -> None:
    ts = 5.0 * np.arange(720)  # an hour; a dataset of 20 % of memory loaded 30 minutes in
    used = (0.3 + 0.2 * np.clip((ts - 1800.0) / 30.0, 0.0, 1.0)) * HOST_TOTAL + _noise(ts, 31)
    assert [
        a for a in _fired(_replay(*_host(ts, used))) if a.rule.alert != "host_memory_leak"
    ] == []


TB = 1e12


def _disk(ts: np.ndarray, every_s: float, ckpt_bytes: float, keep: int | None) -> np.ndarray:
    """Free space on a 30 TB disk that takes a checkpoint every ``every_s``; with ``keep``,
    only the last ``keep`` checkpoints stay (older ones deleted)."""
    done = np.floor(ts / every_s)
    on_disk = done if keep is None else np.minimum(done, keep)
    noise = np.random.default_rng(41).normal(0.0, 1e9, ts.size)  # logs, caches: a GB or so
    return 8 * TB - on_disk * ckpt_bytes + noise


def test_a_disk_that_fills_over_many_hours_is_found_two_hours_before_it_is_full() -> None:
    ts = 60.0 * np.arange(int(16 * HOUR / 60))  # 8 TB free, 0.5 TB a checkpoint, every hour
    free = _disk(ts, HOUR, 0.5 * TB, keep=None)
    empty = 16 * HOUR  # the 16th checkpoint fills it
    alerts = _replay(Series("host.disk_free_bytes", ts, free))
    filling = _fired(alerts, "disk_full")
    assert filling and filling[0].rule.alert == "disk_filling"
    assert empty - 2.5 * HOUR <= filling[0].ts <= empty - HOUR  # a checkpoint an hour: steps


def test_a_disk_whose_old_checkpoints_are_deleted_raises_nothing() -> None:
    ts = 60.0 * np.arange(int(16 * HOUR / 60))
    free = _disk(ts, HOUR, 0.5 * TB, keep=3)
    assert _fired(_replay(Series("host.disk_free_bytes", ts, free))) == []


@pytest.mark.parametrize("per_hour", [2.0, 5.0])
def test_a_gpu_that_heats_by_degrees_an_hour_is_found_when_it_crosses_the_line(
    per_hour: float,
) -> None:
    ts = 5.0 * np.arange(int(8 * HOUR / 5))
    temp = 68.0 + per_hour * ts / HOUR + np.random.default_rng(51).normal(0.0, 1.0, ts.size)
    keep = _lossy(ts, 52, gap_at=HOUR)
    labels = (*NODE.items(), ("gpu", "3"))
    crossed = (80.0 - 68.0) / per_hour * HOUR
    alerts = _replay(Series("gpu.temp_c", ts[keep], temp[keep], labels))
    if crossed > ts[-1]:
        pytest.fail("the series never crosses the line")
    (hot,) = _fired(alerts, "gpu_thermal")
    assert crossed - 600.0 <= hot.ts <= crossed + 600.0
