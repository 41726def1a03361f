"""The ETA: steps left at the pace of productive steps, plus the evaluation and checkpoint
pauses still to come at their cadence and cost, and stalls at their rate."""

from __future__ import annotations

import numpy as np
import pytest

from stepwatch.predict import forecast_eta

TOTAL, STEP_S, EVAL_EVERY, EVAL_S = 5000, 0.5, 500, 30.0


def _times(seed: int, stalls: list[int] = ()) -> np.ndarray:  # type: ignore[assignment]
    """When each step of a run ended: 0.5 s steps (5 % noise), a 30 s evaluation every 500
    steps, a 60 s stall at each of ``stalls``."""
    rng = np.random.default_rng(seed)
    took = STEP_S * (1 + rng.normal(0.0, 0.05, TOTAL))
    took[EVAL_EVERY::EVAL_EVERY] += EVAL_S
    took[list(stalls)] += 60.0
    return np.cumsum(took)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_eta_from_a_third_of_the_run_counts_the_evaluations_to_come(seed: int) -> None:
    ts = _times(seed)
    cut = TOTAL * 3 // 10
    got = forecast_eta(np.arange(cut), ts[:cut], TOTAL)
    truth = ts[-1] - ts[cut - 1]
    assert got is not None and got.at_step == cut - 1
    assert (got.pauses.period, got.pauses.phase, got.pauses.periodic) == (EVAL_EVERY, 0, 2)
    assert got.pauses.periodic_s == pytest.approx(EVAL_S, rel=0.05)
    assert got.eta_s == pytest.approx(truth, rel=0.03)
    assert got.eta_s_p10 < got.eta_s < got.eta_s_p90
    assert got.step_s == pytest.approx(STEP_S, rel=0.02)
    assert abs(got.naive_s / truth - 1) > 0.08  # the naive figure misses the pauses


def test_the_interval_holds_the_truth_about_as_often_as_it_says() -> None:
    held = []
    for seed in range(100, 130):
        ts = _times(seed)
        cut = TOTAL * 3 // 10
        got = forecast_eta(np.arange(cut), ts[:cut], TOTAL)
        assert got is not None
        held.append(got.eta_s_p10 <= ts[-1] - ts[cut - 1] <= got.eta_s_p90)
    assert 0.6 <= np.mean(held) <= 0.97


def test_stalls_are_no_cadence_and_count_at_their_rate() -> None:
    ts = _times(4, stalls=[137, 1300, 2211])
    cut = 2500
    got = forecast_eta(np.arange(cut), ts[:cut], TOTAL)
    assert got is not None
    assert got.pauses.period == EVAL_EVERY and got.pauses.other == 3
    assert got.pauses.other_s == pytest.approx(180.0, rel=0.05)
    evaluations, stalls = 5 * EVAL_S, 3 / cut * (TOTAL - cut) * 60.0
    assert got.eta_s == pytest.approx((TOTAL - cut) * STEP_S + evaluations + stalls, rel=0.05)


def test_an_evaluation_that_slows_the_next_step_too_is_one_pause() -> None:
    """Each evaluation also slows the step after it (10 s): one pause of 40 s at the cadence,
    not a second cadence or stalls."""
    ts = _times(5)
    took = np.diff(ts, prepend=0.0)
    took[EVAL_EVERY + 1 :: EVAL_EVERY] += 10.0
    ts = np.cumsum(took)
    cut = TOTAL * 3 // 10
    got = forecast_eta(np.arange(cut), ts[:cut], TOTAL)
    assert got is not None
    assert (got.pauses.period, got.pauses.periodic, got.pauses.other) == (EVAL_EVERY, 2, 0)
    assert got.pauses.periodic_s == pytest.approx(EVAL_S + 10.0, rel=0.05)
    assert got.eta_s == pytest.approx(ts[-1] - ts[cut - 1], rel=0.03)


def test_a_restart_redoes_steps_and_the_last_time_of_each_counts() -> None:
    ts = _times(5)
    steps = np.r_[np.arange(1000), np.arange(900, 1500)]  # died at 999, resumed from 900
    times = np.r_[ts[:1000], ts[900:1500] + (ts[999] - ts[899]) + 120.0]
    got = forecast_eta(steps[::-1], times[::-1], TOTAL)  # in any order
    assert got is not None and got.at_step == 1499
    assert got.pauses.other == 1 and got.pauses.other_s > 120.0  # the restart, and steps redone


def test_too_few_steps_or_none_left_is_no_eta() -> None:
    ts = _times(6)
    assert forecast_eta(np.arange(10), ts[:10], TOTAL) is None
    assert forecast_eta(np.arange(TOTAL), ts, TOTAL) is None
    nan = np.where(np.arange(100) < 15, ts[:100], np.nan)
    assert forecast_eta(np.arange(100), nan, TOTAL) is None
