"""The law of a project's finished runs: fitted on runs of one law whatever their schedules,
lengths and levels, it forecasts a new run's end from a fifth of it better than the run's own
law can; it is refused by a run it misfits; and it needs two runs that reached their plan."""

from __future__ import annotations

import numpy as np
import pytest

from stepwatch.predict import (
    FINAL_WINDOW,
    FinishedCurve,
    LossLaw,
    LrSchedule,
    ProjectLaw,
    fit_project_law,
    forecast_final_loss,
    lr_areas,
)

LAW, MOMENTUM = LossLaw(l0=1.5, a=1.0, alpha=0.4, c=0.2), 0.995
KINDS = ("cosine", "linear", "wsd", "inv_sqrt", "constant")


def _curve(
    kind: str, total: int, seed: int, law: LossLaw = LAW, level: float = 0.0
) -> tuple[LrSchedule, np.ndarray, float]:
    """A schedule, every step's noisy loss under ``law`` moved by ``level``, the true final."""
    decay = total * 8 // 10 if kind == "wsd" else None
    schedule = LrSchedule(kind, 3e-3, total, total // 20, 1e-4, decay)
    s1, s2 = lr_areas(schedule.lr(np.arange(total)), MOMENTUM)
    clean = law.loss(s1, s2) + level
    noisy = clean + np.random.default_rng(seed).normal(0.0, 0.03, total)
    return schedule, noisy, float(clean[-FINAL_WINDOW:].mean())


def _finished(seed: int) -> list[FinishedCurve]:
    """Five finished runs, one per schedule, of two lengths and levels of their own."""
    out = []
    for i, kind in enumerate(KINDS):
        total = (2000, 4000)[i % 2]
        schedule, loss, _ = _curve(kind, total, seed + i, level=0.02 * (i - 2))
        out.append(FinishedCurve(schedule.lr(np.arange(total)), np.arange(total), loss))
    return out


def test_the_project_s_law_foretells_a_new_run_better_than_its_own_fifth_does() -> None:
    prior = fit_project_law(_finished(seed=10))
    assert prior is not None and prior.runs == 5 and 0 < prior.spread(0.2) < 0.02
    schedule, loss, truth = _curve("cosine", 3000, seed=99, level=0.05)
    seen = np.arange(600)
    lent = forecast_final_loss(seen, loss[:600], 3000, schedule=schedule, prior=prior)
    alone = forecast_final_loss(seen, loss[:600], 3000, schedule=schedule)
    assert lent is not None and alone is not None
    assert lent.project_runs == 5 and alone.project_runs == 0
    assert lent.p10 <= truth <= lent.p90
    assert abs(lent.p50 / truth - 1) < 0.01 < 0.03 < abs(alone.p50 / truth - 1)


def test_a_run_of_another_law_refuses_the_project_s() -> None:
    prior = fit_project_law(_finished(seed=20))
    other = LossLaw(l0=0.5, a=40.0, alpha=1.2, c=0.0)  # a curve that bends far faster
    schedule, loss, _ = _curve("cosine", 3000, seed=7, law=other)
    got = forecast_final_loss(np.arange(900), loss[:900], 3000, schedule=schedule, prior=prior)
    assert got is not None and got.project_runs == 0


def test_runs_that_ended_before_their_plan_do_not_count() -> None:
    curves = _finished(seed=30)
    cut = [FinishedCurve(c.rates, c.steps[: len(c.steps) // 2], c.loss[: len(c.loss) // 2])
           for c in curves[1:]]  # fmt: skip
    assert fit_project_law([curves[0], *cut]) is None
    got = fit_project_law(curves[:2] + cut)
    assert got is not None and got.runs == 2


def test_a_law_round_trips_through_its_numbers() -> None:
    prior = fit_project_law(_finished(seed=40))
    assert prior is not None
    assert ProjectLaw.from_dict(prior.as_dict()) == prior


@pytest.mark.parametrize("momentum", [0.99, 0.999])
def test_the_momentum_is_the_one_whose_laws_foretold_the_runs_best(momentum: float) -> None:
    global MOMENTUM  # the curves' own momentum
    saved, MOMENTUM = MOMENTUM, momentum
    try:
        prior = fit_project_law(_finished(seed=50))
    finally:
        MOMENTUM = saved
    assert prior is not None and prior.momentum == momentum


def test_the_level_is_read_from_the_later_half_alone_whatever_the_earlier_misfit() -> None:
    """Points of the earlier half far under the law (an early transient) move neither the
    level nor its interval: the forecast is the law at the later half's level."""
    prior = ProjectLaw(LAW, MOMENTUM, 5, (0.001,) * 6)
    schedule, _, truth = _curve("constant", 3000, seed=0, level=0.05)
    s1, s2 = lr_areas(schedule.lr(np.arange(3000)), MOMENTUM)
    seen = np.arange(900)
    loss = LAW.loss(s1[seen], s2[seen]) + np.where(seen < 450, -0.1, 0.05)
    got = forecast_final_loss(seen, loss, 3000, schedule=schedule, prior=prior)
    assert got is not None and got.project_runs == 5
    assert got.p10 <= truth <= got.p90
    assert abs(got.p50 / truth - 1) < 0.002
