"""A run's forecast as the API answers it: its ETA and final loss from its loss and learning
rate series and its plan, with the stated schedule when its config has a readable one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._eta import forecast_eta
from ._final_loss import forecast_final_loss
from ._schedule import LrSchedule, ScheduleError

__all__ = ["Series", "forecast_run"]


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
) -> dict[str, Any]:
    """The forecast's fields (None where there is too little to tell, no loss or no plan); a
    schedule the config states wrongly is said in ``schedule_error`` and the rate seen used
    instead."""
    schedule, error = _schedule(config)
    out: dict[str, Any] = {
        "at_step": int(loss.step.max()) if loss is not None and len(loss.step) else None,
        "planned_total_steps": planned_total_steps,
        "schedule": "stated" if schedule is not None else None,
        "schedule_error": error,
        **dict.fromkeys(("eta_s", "eta_s_p10", "eta_s_p90", "naive_eta_s", "step_s")),
        **dict.fromkeys(("final_loss_p10", "final_loss_p50", "final_loss_p90", "basis")),
    }
    if loss is None or not planned_total_steps:
        return out
    eta = forecast_eta(loss.step, loss.ts, planned_total_steps)
    if eta is not None:
        out |= {"eta_s": eta.eta_s, "eta_s_p10": eta.eta_s_p10, "eta_s_p90": eta.eta_s_p90,
                "naive_eta_s": eta.naive_s, "step_s": eta.step_s}  # fmt: skip
    seen = None if lr is None else (lr.step, lr.value)
    final = forecast_final_loss(
        loss.step, loss.value, planned_total_steps, schedule=schedule, lr=seen
    )
    if final is not None:
        out |= {"final_loss_p10": final.p10, "final_loss_p50": final.p50,
                "final_loss_p90": final.p90, "basis": final.basis}  # fmt: skip
    return out


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
