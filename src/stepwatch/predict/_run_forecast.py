"""A run's forecast as the API answers it: its ETA and final loss from its loss and learning
rate series and its plan, with the stated schedule when its config has a readable one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._eta import forecast_eta
from ._final_loss import forecast_final_loss, planned_rates
from ._project_law import FinishedCurve, ProjectLaw
from ._schedule import LrSchedule, ScheduleError
from ._success import CurveRisk, success_probability

__all__ = ["Series", "finished_curve", "forecast_run"]


@dataclass(frozen=True, slots=True)
class Series:
    """One metric of a run: its steps, times and values, in any order."""

    step: np.ndarray
    ts: np.ndarray
    value: np.ndarray


def forecast_run(
    loss: Series | None,
    lr: Series | None,
    planned_total_steps: int | None,
    config: Mapping[str, Any],
    *,
    alerts: Sequence[str] = (),
    prior: ProjectLaw | None = None,
) -> dict[str, Any]:
    """The forecast's fields (None where there is too little to tell, no loss or no plan); a
    schedule the config states wrongly is said in ``schedule_error`` and the rate seen used
    instead. ``alerts``: the kinds of the run's alerts so far, one per incident; ``prior``: the
    law of the project's finished runs (``project_runs`` says how many, 0 where not taken)."""
    schedule, error = _schedule(config)
    out: dict[str, Any] = {
        "at_step": int(loss.step.max()) if loss is not None and len(loss.step) else None,
        "planned_total_steps": planned_total_steps,
        "schedule": "stated" if schedule is not None else None,
        "schedule_error": error,
        **dict.fromkeys(("eta_s", "eta_s_p10", "eta_s_p90", "naive_eta_s", "step_s")),
        **dict.fromkeys(("final_loss_p10", "final_loss_p50", "final_loss_p90", "basis")),
        "project_runs": 0,
        **dict.fromkeys(("loss_cone", "success_probability")),
    }
    if loss is None or not planned_total_steps:
        return out
    eta = forecast_eta(loss.step, loss.ts, planned_total_steps)
    if eta is not None:
        out |= {"eta_s": eta.eta_s, "eta_s_p10": eta.eta_s_p10, "eta_s_p90": eta.eta_s_p90,
                "naive_eta_s": eta.naive_s, "step_s": eta.step_s}  # fmt: skip
    seen = None if lr is None else (lr.step, lr.value)
    final = forecast_final_loss(
        loss.step, loss.value, planned_total_steps, schedule=schedule, lr=seen, prior=prior
    )
    if final is not None:
        out |= {"final_loss_p10": final.p10, "final_loss_p50": final.p50,
                "final_loss_p90": final.p90, "basis": final.basis,
                "loss_cone": final.cone.as_dict(), "project_runs": final.project_runs}  # fmt: skip
    risk = _curve_risk(loss, lr, schedule, planned_total_steps)
    timed = loss.ts[np.isfinite(loss.ts)]  # a bounded read leaves older samples untimed
    elapsed = float(timed.max() - timed.min()) if len(timed) else 0.0
    out["success_probability"] = success_probability(risk, alerts, elapsed, out["eta_s"])
    return out


def finished_curve(
    loss: Series, lr: Series | None, planned_total_steps: int, config: Mapping[str, Any]
) -> FinishedCurve | None:
    """A run that ended, as its project's law reads it: its loss and every planned step's
    rate (the stated schedule's, else the rate seen); None where no rate is known."""
    schedule, _ = _schedule(config)
    seen = None if lr is None else (lr.step, lr.value)
    rates = planned_rates(planned_total_steps, schedule, seen)
    return None if rates is None else FinishedCurve(rates, loss.step, loss.value)


def _curve_risk(
    loss: Series, lr: Series | None, schedule: LrSchedule | None, planned: int
) -> CurveRisk | None:
    """The curve's features at the last step seen, the rate ahead from the stated schedule
    (or none known without one)."""
    order = np.argsort(loss.step, kind="stable")
    values = np.asarray(loss.value, np.float64)[order]
    if not len(values):
        return None
    now = int(loss.step[order[-1]])
    if schedule is not None:
        rates = schedule.lr(np.arange(now, max(planned, now + 1)))
        return CurveRisk.of(values, float(rates[0]), float(rates.max()))
    seen = None if lr is None or not len(lr.value) else float(lr.value[np.argmax(lr.step)])
    return CurveRisk.of(values, seen, None)


def _schedule(config: Mapping[str, Any]) -> tuple[LrSchedule | None, str | None]:
    stated = config.get("lr_schedule")
    if stated is None:
        return None, None
    if not isinstance(stated, Mapping):
        return None, f"lr_schedule: expected a mapping, got {type(stated).__name__}"
    try:
        return LrSchedule.from_config(stated), None
    except ScheduleError as exc:
        return None, str(exc)
