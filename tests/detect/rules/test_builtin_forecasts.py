"""The built-in forecasts: memory, heat and disk on their way to breaking are told with the time
they will break, while there is time to act; what only looks like it for a while (a start-up
rise that levels off, the caching allocator's sawtooth, evaluation pauses) raises nothing."""

from __future__ import annotations

import numpy as np
import pytest
from _heat import heat_wander

from stepwatch.detect import Alert

from .test_builtin_trends import HOST_TOTAL, HOUR, NODE, TB, Series, _disk, _fired, _host, _replay

GPU = (*NODE.items(), ("gpu", "3"))
GPU_TOTAL = 80 * 1024.0**3


def _gpu_memory(ts: np.ndarray, share: np.ndarray, seed: int) -> list[Series]:
    """NVML's used and total memory of one GPU, used at ``share`` of the total with a reading's
    noise (0.3 % of the total)."""
    noise = np.random.default_rng(seed).normal(0.0, 0.003, ts.size)
    used = np.clip(share + noise, 0.0, 1.0) * GPU_TOTAL
    return [
        Series("gpu.mem_used_bytes", ts, used, GPU),
        Series("gpu.mem_total_bytes", ts, np.full(ts.size, GPU_TOTAL), GPU),
    ]


def _started(ts: np.ndarray, level: float) -> np.ndarray:
    """A run's start: the model, optimizer state and first activations allocated in steps over
    its first two minutes, then the level it trains at."""
    return level * np.minimum(np.ceil(ts / 30.0) / 4.0, 1.0)


def _first(alerts: list[Alert], kind: str) -> Alert:
    fired = _fired(alerts, kind)
    assert fired, f"no {kind}"
    return fired[0]


@pytest.mark.parametrize(
    ("ramp_min", "seed", "error"),
    [(15.0, 1, 0.75), (30.0, 2, 0.35), (60.0, 3, 0.3), (120.0, 4, 0.3)],  # 120: 40 min at 90 %
)
def test_gpu_memory_on_its_way_to_full_is_told_before_pressure_with_when(
    ramp_min: float, seed: int, error: float
) -> None:
    ts = 5.0 * np.arange(int((1 + ramp_min / 60) * HOUR / 5))
    begin, full = 1800.0, 1800.0 + ramp_min * 60.0  # from 70 % to 100 %, linearly
    share = _started(ts, 0.7) + 0.3 * np.clip((ts - begin) / (full - begin), 0.0, 1.0)
    alert = _first(_replay(*_gpu_memory(ts, share, seed)), "forecast_oom")
    pressure = begin + (full - begin) * (0.9 - 0.7) / 0.3  # where gpu_memory_pressure's line is
    assert begin < alert.ts < pressure - 120.0  # minutes to act
    assert alert.predicted_ts is not None  # a line that lags a ramp just begun: late at first
    assert abs(alert.predicted_ts - full) <= error * (full - alert.ts)
    summary = alert.annotations["summary"]
    assert summary.startswith("GPU 3 of n0 will run out of memory in ~") and "min" in summary


@pytest.mark.parametrize(
    ("level", "step"), [(0.6, 0.0), (0.85, 0.0), (0.6, 0.05), (0.8, 0.05), (0.7, 0.15)]
)
def test_gpu_memory_that_rises_then_levels_off_raises_nothing(level: float, step: float) -> None:
    ts = 5.0 * np.arange(int(3 * HOUR / 5))
    more = step * np.clip((ts - 1800.0) / 120.0, 0.0, 1.0)  # taken within 2 minutes, once
    share = _started(ts, level) + more
    assert _fired(_replay(*_gpu_memory(ts, share, 7)), "forecast_oom") == []


@pytest.mark.parametrize("period_s", [20.0, 45.0, 90.0])
def test_the_caching_allocators_sawtooth_raises_nothing(period_s: float) -> None:
    ts = 5.0 * np.arange(int(3 * HOUR / 5))
    tooth = 0.15 * ((ts % period_s) / period_s)  # taken step by step, freed at once
    freed = 0.1 * ((ts % 600.0) < 15.0)  # and empty_cache() every 10 minutes
    share = _started(ts, 0.7) + tooth - freed
    assert _fired(_replay(*_gpu_memory(ts, share, 11)), "forecast_oom") == []


def _gpu_temp(ts: np.ndarray, seed: int) -> np.ndarray:
    """A GPU under load: from 35 °C at the start to 70 °C (a minute's time constant), readings
    that wander by a degree or two (AR(1)), 15 °C cooler during a 90 s evaluation every 10
    minutes and a 60 s checkpoint every 30."""
    wander = heat_wander(ts.size, seed)
    paused = ((ts % 600.0) >= 500.0) & ((ts % 600.0) < 590.0)
    saving = (ts % 1800.0) < 60.0
    load = 35.0 + 35.0 * (1.0 - np.exp(-ts / 60.0))
    return load + wander - 15.0 * paused - 8.0 * saving


@pytest.mark.parametrize(("per_hour", "seed"), [(15.0, 21), (20.0, 22), (30.0, 23)])
def test_a_gpu_heating_towards_throttling_is_told_before_it_gets_there(
    per_hour: float, seed: int
) -> None:
    ts = 5.0 * np.arange(int(4 * HOUR / 5))
    begin = 1800.0  # a failing fan from then on
    temp = _gpu_temp(ts, seed) + per_hour * np.clip(ts - begin, 0.0, None) / HOUR
    throttles = begin + (85.0 - 70.0) / per_hour * HOUR
    alert = _first(_replay(Series("gpu.temp_c", ts, temp, GPU)), "forecast_thermal")
    assert begin < alert.ts < throttles - 300.0
    assert alert.predicted_ts is not None  # a line of 20 minutes lags a climb just begun:
    lead = throttles - alert.ts  # at 30 °C/h its first "when" is late by more than the lead
    assert throttles - 0.25 * lead <= alert.predicted_ts <= throttles + 1.5 * lead
    assert alert.annotations["summary"].startswith("GPU 3 of n0 will reach 85 °C in ~")


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_a_gpu_that_heats_at_load_start_then_levels_off_raises_nothing(seed: int) -> None:
    ts = 5.0 * np.arange(int(6 * HOUR / 5))
    temp = _gpu_temp(ts, seed) + 5.0  # a hot one: 75 °C, its readings up to 80 °C
    assert _fired(_replay(Series("gpu.temp_c", ts, temp, GPU)), "forecast_thermal") == []


@pytest.mark.parametrize("seed", [34, 35, 36])
def test_a_gpu_that_cools_while_its_job_starves_and_warms_again_raises_nothing(seed: int) -> None:
    ts = 5.0 * np.arange(int(2 * HOUR / 5))
    starved = (ts >= 1800.0) & (ts < 2500.0)  # data-bound for 12 minutes, then back at once
    temp = _gpu_temp(ts, seed) + 6.0 - 10.0 * starved
    assert _fired(_replay(Series("gpu.temp_c", ts, temp, GPU)), "forecast_thermal") == []


def test_a_disk_filling_over_many_hours_is_forecast_hours_ahead_with_when() -> None:
    ts = 60.0 * np.arange(int(16 * HOUR / 60))  # 8 TB free, 0.5 TB a checkpoint, every hour
    free = _disk(ts, HOUR, 0.5 * TB, keep=None)
    empty = 16 * HOUR
    alerts = _replay(Series("host.disk_free_bytes", ts, free))
    forecast = _first(alerts, "forecast_disk_full")
    assert empty - 6.5 * HOUR <= forecast.ts <= empty - 4 * HOUR
    assert forecast.predicted_ts is not None
    assert abs(forecast.predicted_ts - empty) <= 1.5 * HOUR  # a checkpoint an hour: steps
    assert forecast.ts < _first(alerts, "disk_full").ts  # before disk_filling's two hours


def test_host_memory_filling_within_the_hour_is_forecast_with_when() -> None:
    ts = 5.0 * np.arange(int(3 * HOUR / 5))
    begin, full = 1.5 * HOUR, 2.5 * HOUR  # from 40 % to full in an hour
    share = _started(ts, 0.4) + 0.6 * np.clip((ts - begin) / (full - begin), 0.0, 1.0)
    noise = np.random.default_rng(41).normal(0.0, 0.002, ts.size)
    alerts = _replay(*_host(ts, np.minimum(share + noise, 1.0) * HOST_TOTAL))
    forecast = _first(alerts, "forecast_host_oom")
    assert begin < forecast.ts < full - 900.0
    assert forecast.predicted_ts is not None
    assert abs(forecast.predicted_ts - full) <= 0.25 * (full - forecast.ts)


def test_host_memory_that_rises_at_start_then_levels_off_raises_nothing() -> None:
    ts = 5.0 * np.arange(int(3 * HOUR / 5))
    noise = np.random.default_rng(43).normal(0.0, 0.002, ts.size)
    used = (_started(ts, 0.6) + noise) * HOST_TOTAL
    assert _fired(_replay(*_host(ts, used)), "forecast_host_oom") == []
