"""The final-loss forecast: the law of the learning rate's areas fitted to the loss seen, run
forward along the rate to come; its interval holds the truth on curves of that law, and widens
when the schedule is not stated."""

from __future__ import annotations

import numpy as np
import pytest

from stepwatch.predict import FINAL_WINDOW, LossLaw, LrSchedule, forecast_final_loss, lr_areas

TOTAL = 3000
LAW = LossLaw(l0=2.0, a=1.2, alpha=0.5, c=0.3)


def _run(kind: str, seed: int, noise: float = 0.05) -> tuple[LrSchedule, np.ndarray, float]:
    """A schedule, the noisy loss of every planned step under ``LAW``, and the true final."""
    schedule = LrSchedule(kind, 3e-3, TOTAL, warmup_steps=100, final_lr=3e-4)
    s1, s2 = lr_areas(schedule.lr(np.arange(TOTAL)))
    curve = LAW.loss(s1, s2)
    loss = curve + np.random.default_rng(seed).normal(0.0, noise, TOTAL)
    return schedule, loss, float(curve[-FINAL_WINDOW:].mean())


def test_areas_grow_with_the_rate_and_count_only_its_drops() -> None:
    s1, s2 = lr_areas(np.array([1.0, 2.0, 2.0, 1.0, 1.0]), momentum=0.5)
    np.testing.assert_allclose(s1, [1, 3, 5, 6, 7])
    np.testing.assert_allclose(s2, [0, 0, 0, 1, 1.5])  # the rise is no drop; m halves a step


@pytest.mark.parametrize("momentum", [0.9, 0.999])
def test_areas_over_a_long_plan_match_the_step_by_step_recurrence(momentum: float) -> None:
    lr = np.random.default_rng(5).random(50_000)  # drops at every other step, many chunks
    expected, m = [], 0.0
    for drop in np.maximum(-np.diff(lr, prepend=lr[:1]), 0.0).tolist():
        m = momentum * m + drop
        expected.append(m)
    np.testing.assert_allclose(lr_areas(lr, momentum)[1], np.cumsum(expected), rtol=1e-9)


def test_a_fit_recovers_the_law_of_a_noiseless_curve() -> None:
    schedule = LrSchedule("cosine", 3e-3, TOTAL, warmup_steps=100, final_lr=3e-4)
    s1, s2 = lr_areas(schedule.lr(np.arange(TOTAL)))
    got = LossLaw.fit(s1[200:], s2[200:], LAW.loss(s1, s2)[200:])
    assert got.alpha == pytest.approx(LAW.alpha, rel=0.02)
    assert got.c == pytest.approx(LAW.c, rel=0.05)
    np.testing.assert_allclose(got.loss(s1, s2)[200:], LAW.loss(s1, s2)[200:], rtol=1e-3)


@pytest.mark.parametrize("kind", ["cosine", "linear", "inv_sqrt", "constant"])
def test_with_its_schedule_a_forecast_from_a_third_of_the_run_holds_the_final_loss(
    kind: str,
) -> None:
    schedule, loss, truth = _run(kind, seed=11)
    cut = TOTAL * 3 // 10
    got = forecast_final_loss(np.arange(cut), loss[:cut], TOTAL, schedule=schedule)
    assert got is not None and got.basis == "schedule" and got.at_step == cut - 1
    assert got.p10 <= truth <= got.p90
    # The law's shapes are weighed by how well each foretells the curve it has seen; the
    # annealing a third of a cosine has begun barely stands out of the noise, so the others
    # still weigh.
    assert got.p50 == pytest.approx(truth, rel=0.1)
    assert loss[cut - 100 : cut].mean() - truth > 0.2  # far from where the loss stands now


def test_without_a_schedule_the_rate_seen_gives_a_wider_interval() -> None:
    schedule, loss, truth = _run("cosine", seed=12)
    cut = TOTAL // 2
    steps = np.arange(cut)
    stated = forecast_final_loss(steps, loss[:cut], TOTAL, schedule=schedule)
    seen = forecast_final_loss(steps, loss[:cut], TOTAL, lr=(steps, schedule.lr(steps)))
    blind = forecast_final_loss(steps, loss[:cut], TOTAL)
    assert stated is not None and seen is not None and blind is not None
    assert (seen.basis, blind.basis) == ("observed", "steps")
    assert seen.p90 - seen.p10 > stated.p90 - stated.p10
    assert seen.p10 <= truth <= seen.p90


def test_too_little_seen_or_nothing_left_to_forecast_is_no_forecast() -> None:
    _, loss, _ = _run("cosine", seed=13)
    assert forecast_final_loss(np.arange(10), loss[:10], TOTAL) is None
    assert forecast_final_loss(np.arange(TOTAL), loss, TOTAL) is None  # it is over
    nan = np.where(np.arange(300) % 20 == 0, loss[:300], np.nan)  # 15 finite steps
    assert forecast_final_loss(np.arange(300), nan, TOTAL) is None


def test_repeated_and_unordered_steps_count_once_each() -> None:
    schedule, loss, _ = _run("cosine", seed=14)
    steps = np.arange(900)
    once = forecast_final_loss(steps, loss[:900], TOTAL, schedule=schedule)
    order = np.random.default_rng(0).permutation(1800)
    twice_steps, twice_loss = np.tile(steps, 2)[order], np.tile(loss[:900], 2)[order]
    twice = forecast_final_loss(twice_steps, twice_loss, TOTAL, schedule=schedule)
    assert once is not None and twice is not None
    assert twice.law == once.law and twice.at_step == once.at_step


def test_inside_the_final_window_the_steps_seen_count_as_they_were() -> None:
    schedule, loss, _ = _run("cosine", seed=15)
    cut = TOTAL - FINAL_WINDOW // 2
    got = forecast_final_loss(np.arange(cut), loss[:cut], TOTAL, schedule=schedule)
    assert got is not None
    s1, s2 = lr_areas(schedule.lr(np.arange(TOTAL)))
    seen, ahead = loss[TOTAL - FINAL_WINDOW : cut], got.law.loss(s1, s2)[cut:]
    assert got.p50 == pytest.approx(np.concatenate([seen, ahead]).mean(), abs=0.01)
    assert got.p90 - got.p10 < 0.02  # half of it is known
