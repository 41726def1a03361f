"""The step timer: step and phase durations from an injected clock, recorded per step."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stepwatch.model import Event
from stepwatch.sdk import Run
from stepwatch.sdk._timer import StepTimer

Spooled = Callable[[Path], tuple[list[tuple[str, dict[str, str], int, float]], list[Event]]]


class FakeClock:
    """Advances by exactly one second per reading."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def __call__(self) -> float:
        return float(next(self._ticks))


def test_step_and_phase_times_are_recorded_for_their_step() -> None:
    recorded: list[tuple[dict[str, float], int]] = []
    timer = StepTimer(lambda times, step: recorded.append((times, step)), FakeClock())
    with timer.step(7):  # clock 0
        with timer.phase("data"):  # 1 .. 2
            pass
        with timer.phase("compute"):  # 3 .. 4
            pass
        with timer.phase("data"):  # 5 .. 6
            pass
        with timer.phase("comm"):  # 7 .. 8
            pass
    # step ends at 9
    assert recorded == [
        (
            {
                "train.step_time_s": 9.0,
                "train.data_time_s": 2.0,
                "train.compute_time_s": 1.0,
                "train.comm_time_s": 1.0,
            },
            7,
        )
    ]


def test_misuse_is_an_error_and_a_failed_step_records_nothing() -> None:
    recorded: list[object] = []
    timer = StepTimer(lambda times, step: recorded.append(step), FakeClock())
    with pytest.raises(RuntimeError, match="inside a run.step"):
        with timer.phase("data"):
            pass
    with pytest.raises(RuntimeError, match="do not nest"), timer.step(1), timer.step(2):
        pass
    with pytest.raises(KeyError), timer.step(3):
        raise KeyError("boom")
    assert recorded == []
    with timer.step(4):
        pass
    assert recorded == [4]


def test_run_step_timer_uses_perf_counter_and_the_run_labels(
    spooled: Spooled, tmp_path: Path
) -> None:
    run = Run(dir=tmp_path, environ={"RANK": "5"}, hostname="h", run_id="t", heartbeat_s=None)
    for step in range(3):
        with run.step(step):
            with run.phase("data"):
                time.sleep(0.002)
            with run.phase("compute"):
                time.sleep(0.004)
    run.finish()
    samples, _ = spooled(run.spool_dir)
    by_step: dict[int, dict[str, float]] = {}
    for name, labels, step, value in samples:
        assert labels["rank"] == "5"
        by_step.setdefault(step, {})[name] = value
    assert sorted(by_step) == [0, 1, 2]
    for times in by_step.values():
        assert times["train.data_time_s"] >= 0.002 and times["train.compute_time_s"] >= 0.004
        assert (
            times["train.step_time_s"] >= times["train.data_time_s"] + times["train.compute_time_s"]
        )
