"""Goodput: a run's wall time split into productive steps and its badput, each bucket found
from what the run logged: evaluations, checkpoints, data wait, stalls and restarts."""

from __future__ import annotations

import numpy as np
import pytest

from stepwatch.predict import goodput

T0, STEPS, STEP_S, WAIT_S = 1_780_000_000.0, 2000, 0.5, 0.1


def _run(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Steps in the order they ran and when each ended: a minute of start-up, 0.5 s steps, a
    20 s evaluation every 500 steps, 8 s checkpoints at 750 and 1750, a 30 s stall at 1234,
    and a crash after step 1600 that resumes 100 s later from step 1501."""
    rng = np.random.default_rng(seed)
    took = STEP_S * (1 + rng.normal(0.0, 0.02, STEPS))
    took[[500, 1000, 1500]] += 20.0
    took[[750, 1750]] += 8.0
    took[1234] += 30.0
    first = np.arange(1601)
    again = np.arange(1501, STEPS)
    times_first = T0 + 60.0 + np.cumsum(took[:1601]) - took[0]
    resume = times_first[-1] + 100.0
    times_again = resume + np.cumsum(took[1501:]) - took[1501] + took[1501]
    return np.r_[first, again], np.r_[times_first, times_again]


def test_each_bucket_holds_what_the_run_spent_on_it() -> None:
    steps, ts = _run()
    waits = (np.arange(STEPS), np.full(STEPS, WAIT_S))
    got = goodput(T0, steps, ts, data_wait=waits, evaluations=np.array([500, 1000, 1500]),
                  checkpoints=(np.array([750, 1750]), np.array([7.5, np.nan])))  # fmt: skip
    assert got is not None
    assert got.wall_s == pytest.approx(ts.max() - T0)
    assert got.startup_s == pytest.approx(60.0)
    assert got.evaluation_s == pytest.approx(60.0, abs=1.0)
    assert got.checkpoint_s == pytest.approx(7.5 + 8.0, abs=0.5)  # as written, else the pause
    assert got.stalls_s == pytest.approx(30.0, abs=0.5)
    assert got.lost_s == pytest.approx(100 * STEP_S + 100.0 + STEP_S, rel=0.02)
    assert got.data_wait_s == pytest.approx(WAIT_S * (STEPS - 2), rel=0.01)
    productive = (STEPS - 1) * (STEP_S - WAIT_S)
    assert got.productive_s == pytest.approx(productive, rel=0.02)
    assert got.share == pytest.approx(got.productive_s / got.wall_s)
    assert sum(v for k, v in got.as_dict().items() if k not in ("wall_s", "goodput")) == (
        pytest.approx(got.wall_s)
    )


def test_without_markers_pauses_are_stalls_and_steps_in_any_order_read_in_time() -> None:
    steps, ts = _run(1)
    order = np.random.default_rng(0).permutation(len(steps))
    got = goodput(T0, steps[order], ts[order])
    assert got is not None
    assert got.evaluation_s == got.checkpoint_s == got.data_wait_s == 0.0
    assert got.stalls_s == pytest.approx(60.0 + 16.0 + 30.0, abs=1.5)
    assert goodput(T0, steps[:1], ts[:1]) is None
