"""A run that finishes, or goes quiet for good, leaves nothing behind in live detection: the
engines' routes, divisors, groups and log memory, the time-order buffers, the alerts held open."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from stepwatch.detect import (
    DETECTORS,
    Engine,
    LiveDetector,
    RuleFiles,
    RuleSet,
    builtin_rules,
    parse_rules,
)
from stepwatch.model import NO_STEP, Event, SampleBatch, SeriesKey
from stepwatch.sdk import HEARTBEAT

from .test_live import HOT, Recorder

T0 = 1_780_000_000.0
SPAN_S = 60


def _series(run: str) -> list[SeriesKey]:
    """What a run of two nodes of two ranks and two GPUs each sends: every kind of rule reads
    some of it (per series, divided by another series, comparing ranks, nodes and producers)."""
    keys = []
    for node in ("n0", "n1"):
        at = {"run": run, "node": node}
        keys += [SeriesKey.of(n, at) for n in (HEARTBEAT, "host.cpu_pct", "host.mem_used_bytes")]
        for gpu in ("0", "1"):
            keys += [
                SeriesKey.of(n, {**at, "gpu": gpu})
                for n in ("gpu.temp_c", "gpu.util_pct", "gpu.mem_used_bytes", "gpu.mem_total_bytes")
            ]
            rank = str(int(node[1]) * 2 + int(gpu))
            names = ("loss", "grad_norm", "step_time_s", "compute_time_s", "data_time_s")
            keys += [SeriesKey.of(f"train.{n}", {**at, "rank": rank}) for n in names]
    return keys


def _batch(run: str, start: float, seconds: int = SPAN_S, temp: float = 60.0) -> SampleBatch:
    """``seconds`` of a run's samples, one a second for each series, and an out-of-memory line."""
    keys = _series(run)
    ts = np.repeat(start + np.arange(seconds, dtype=np.float64), len(keys))
    series = np.tile(np.arange(len(keys), dtype=np.uint32), seconds)
    value = np.where([k.name == "gpu.temp_c" for k in keys], temp, 1.0)[series]
    steps = np.where([k.name.startswith("train.") for k in keys], 0, NO_STEP)[series]
    steps = np.where(steps == NO_STEP, NO_STEP, (ts - T0).astype(np.int64))
    oom = Event(start, "log", "CUDA out of memory", {"run": run, "node": "n0"}, {})
    return SampleBatch("test", 0, keys, series, ts, steps, value, [oom])


def _held(engine: Engine) -> set[str | None]:
    """The runs an engine keeps any state of."""
    runs = {key.label("run") for key in engine._routes}
    runs |= {dict(entity).get("run") for _, entity in engine._divisors}
    runs |= {group.scope.get("run") for group in engine._groups.values()}
    runs |= {dict(k).get("run") for rule in engine._log_rules for k in rule.last}
    runs |= {dict(labels).get("run") for _, labels in engine._dedup.firing}
    return runs


def test_a_forgotten_run_leaves_nothing_in_the_engine_and_the_others_keep_theirs() -> None:
    engine = Engine(builtin_rules())
    for run in ("r1", "r2"):
        engine.process(_batch(run, T0))
    assert _held(engine) == {"r1", "r2"}
    assert engine._divisors and engine._groups and all(r.last for r in engine._log_rules[:1])
    kept = {k: v for k, v in engine._routes.items() if k.label("run") == "r2"}
    engine.forget_run("r1")
    assert _held(engine) == {"r2"}
    assert engine._routes == kept


@dataclass
class Monotonic:
    """A wall clock the test moves by hand."""

    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


def _live_held(live: LiveDetector) -> set[str | None]:
    """The runs a live detector keeps any state of, in either engine or around them (read on
    its own thread)."""
    return set(live._call(lambda: _state_runs(live), 5.0))


def _state_runs(live: LiveDetector) -> set[str | None]:
    runs = _held(live._engines.now) | _held(live._engines.ordered)
    runs |= {key.label("run") for key in (*live._order._last, *live._order._ids)}
    runs |= set(live._reorder._runs) | set(live._reorder._touched) | set(live._idle._heard)
    runs |= {a.labels.get("run") for a in live._alerts.open.values()}
    return runs


@pytest.fixture
def clock() -> Monotonic:
    return Monotonic()


@pytest.fixture
def live(clock: Monotonic, recorder: Recorder) -> Iterator[LiveDetector]:
    hot = parse_rules(HOT.replace("by: [node]", "by: [node, gpu]"), "hot.yaml", DETECTORS)
    files = RuleFiles(base=RuleSet(builtin_rules().rules + hot.rules))
    detector = LiveDetector(files, recorder, idle_run_s=3600.0, monotonic=clock).start()
    yield detector
    detector.stop()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def _hot(recorder: Recorder, run: str) -> list[str]:
    return [a.state for a in recorder.alerts("hot") if a.labels["run"] == run]


def test_a_finished_run_leaves_nothing_in_live_detection(
    live: LiveDetector, recorder: Recorder
) -> None:
    live.feed([_batch("r1", T0, temp=95.0), _batch("r2", T0, temp=95.0)])
    live.flush()
    assert _live_held(live) == {"r1", "r2"} and live.stats.runs == 2
    assert _hot(recorder, "r1") == ["firing"] * 4
    ended = live.finish_run("r1", T0 + SPAN_S)
    assert {a.rule for a in ended} >= {"hot"}
    assert _hot(recorder, "r1") == ["firing"] * 4 + ["resolved"] * 4
    assert _live_held(live) == {"r2"} and live.stats.runs == 1


def test_a_run_quiet_past_the_idle_time_is_dropped_and_its_alerts_stay_open(
    live: LiveDetector, recorder: Recorder, clock: Monotonic
) -> None:
    live.feed([_batch("r1", T0, temp=95.0), _batch("r2", T0, temp=95.0)])
    live.flush()
    clock.now += 1800.0
    live.feed([_batch("r2", T0 + SPAN_S, temp=95.0)])
    live.flush()
    clock.now += 1800.0  # r1 quiet for an hour, r2 for half an hour
    for _ in range(100):  # the detector looks for quiet runs between batches, every second
        if "r1" not in _live_held(live):
            break
        time.sleep(0.05)
    assert _live_held(live) == {"r2"} and live.stats.runs == 1
    assert _hot(recorder, "r1") == ["firing"] * 4  # nothing resolved them: they stay open
    assert live.finish_run("r1", T0 + 3600.0) == []  # the store's copy is what resolves them
