"""The chance a run makes it: a loss gone non-finite or diverged has failed, a loss rising
while the rate still climbs is at risk, and failures that end runs weigh by the time left."""

from __future__ import annotations

import numpy as np
import pytest

from stepwatch.predict import DIVERGED, CurveRisk, Series, forecast_run, success_probability

HOUR = 3600.0


def _falling(n: int = 600) -> np.ndarray:
    rng = np.random.default_rng(3)
    return 2.0 + 3.0 / np.sqrt(np.arange(n) + 1) + rng.normal(0, 0.02, n)


def test_a_loss_gone_non_finite_lately_has_failed() -> None:
    loss = _falling()
    loss[-3] = np.nan
    risk = CurveRisk.of(loss, 1e-3, 1e-3)
    assert risk.diverged and success_probability(risk, (), HOUR, HOUR) == 0.0


def test_a_non_finite_loss_long_ago_that_recovered_has_not() -> None:
    loss = _falling()
    loss[100] = np.inf
    risk = CurveRisk.of(loss, 1e-3, 1e-3)
    assert not risk.diverged and success_probability(risk, (), HOUR, HOUR) > 0.9


def test_a_loss_risen_past_the_divergence_ratio_has_failed() -> None:
    loss = np.concatenate([_falling(), np.full(100, 2.2 * DIVERGED)])
    risk = CurveRisk.of(loss, 1e-3, 1e-3)
    assert risk.diverged and risk.rise >= DIVERGED - 1


def test_a_falling_loss_with_the_rate_coming_down_makes_it() -> None:
    risk = CurveRisk.of(_falling(), 3e-3, 3e-3)
    assert risk.rise < 0.02 and risk.ahead == 0.0
    assert success_probability(risk, (), HOUR, HOUR) > 0.95


def test_a_rising_loss_is_at_risk_and_more_so_when_the_rate_will_climb() -> None:
    rising = np.concatenate([_falling(400), 2.15 + np.linspace(0, 0.4, 200)])
    settled = CurveRisk.of(rising, 3e-3, 3e-3)
    climbing = CurveRisk.of(rising, 3e-3, 3e-2)
    assert 0 < settled.rise < DIVERGED - 1 and climbing.ahead == pytest.approx(np.log(10))
    calm = success_probability(CurveRisk.of(_falling(), 3e-3, 3e-3), (), HOUR, HOUR)
    assert calm > success_probability(settled, (), HOUR, HOUR)
    assert success_probability(settled, (), HOUR, HOUR) > success_probability(
        climbing, (), HOUR, HOUR
    )


def test_a_loss_still_rising_is_at_more_risk_than_one_that_rose_as_far_and_stopped() -> None:
    climbed = 2.15 + np.linspace(0, 0.35, 100)
    stopped = np.concatenate([_falling(400), climbed, np.full(100, climbed[-1])])
    rising = np.concatenate([_falling(500), climbed])
    held, going = CurveRisk.of(stopped, 3e-3, 3e-3), CurveRisk.of(rising, 3e-3, 3e-3)
    assert going.rise < held.rise and abs(held.trend) < 0.01 < going.trend
    assert CurveRisk.of(_falling(), 3e-3, 3e-3).trend < 0
    assert success_probability(going, (), HOUR, HOUR) < success_probability(held, (), HOUR, HOUR)


def test_failures_that_end_runs_weigh_by_the_time_left_and_others_not_at_all() -> None:
    risk = CurveRisk.of(_falling(), 3e-3, 3e-3)
    clean = success_probability(risk, (), HOUR, HOUR)
    assert success_probability(risk, ["straggler", "gpu_thermal"], HOUR, HOUR) == clean
    one_hour = success_probability(risk, ["node_down"], HOUR, HOUR)
    assert one_hour == pytest.approx(clean * np.exp(-0.5))
    assert success_probability(risk, ["node_down"], HOUR, 4 * HOUR) < one_hour
    assert success_probability(risk, ["node_down", "gpu_errors"], HOUR, HOUR) < one_hour
    assert success_probability(risk, ["node_down"], HOUR, None) == clean


def test_the_run_forecast_reads_the_rate_ahead_from_the_stated_schedule() -> None:
    n = 600
    steps = np.arange(n)
    loss = Series(
        steps, 1e9 + steps * 0.5, np.concatenate([_falling(400), 2.15 + np.linspace(0, 0.4, 200)])
    )
    warm = {"type": "linear", "peak_lr": 0.3, "total_steps": 3000, "warmup_steps": 2000}
    decay = {"type": "linear", "peak_lr": 0.3, "total_steps": 3000, "warmup_steps": 100}
    climbing = forecast_run(loss, None, 3000, {"lr_schedule": warm})["success_probability"]
    falling = forecast_run(loss, None, 3000, {"lr_schedule": decay})["success_probability"]
    assert 0 < climbing < falling < 1


def test_failures_weigh_when_the_older_samples_have_no_time() -> None:
    steps = np.arange(600)
    ts = 1e9 + steps * 6.0
    ts[:300] = np.nan  # a bounded read: older points without their times
    loss = Series(steps, ts, _falling())
    calm = forecast_run(loss, None, 3000, {})["success_probability"]
    struck = forecast_run(loss, None, 3000, {}, alerts=["node_down"])["success_probability"]
    assert 0 < struck < calm
