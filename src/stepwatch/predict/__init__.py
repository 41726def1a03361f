"""Forecasts from a run's data as it arrives: when it will reach its planned last step
(pauses included), and where its loss will land, from the law of its learning rate's areas
and its stated schedule."""

from ._advice import (
    DEFAULT_GPU_MTBF_H,
    Advice,
    RunFacts,
    Setting,
    advise,
    checkpoint_waste,
    count_failures,
    count_restarts,
    idle_gpu_seconds,
    young_daly_interval,
)
from ._eta import Eta, Pauses, forecast_eta
from ._final_loss import FINAL_WINDOW, Cone, LossForecast, forecast_final_loss, planned_rates
from ._goodput import Goodput, goodput
from ._loss_law import ANNEALING_MOMENTUM, LossLaw, Shape, lr_areas
from ._project_law import FinishedCurve, ProjectLaw, fit_project_law
from ._ranks import rank_order
from ._run_forecast import Series, finished_curve, forecast_run
from ._schedule import SCHEDULE_TYPES, LrSchedule, ScheduleError
from ._success import DIVERGED, FATAL_KINDS, FATAL_SHARE, CurveRisk, success_probability

__all__ = [
    "ANNEALING_MOMENTUM",
    "DEFAULT_GPU_MTBF_H",
    "DIVERGED",
    "FATAL_KINDS",
    "FATAL_SHARE",
    "FINAL_WINDOW",
    "SCHEDULE_TYPES",
    "Advice",
    "Cone",
    "CurveRisk",
    "Eta",
    "FinishedCurve",
    "Goodput",
    "LossForecast",
    "LossLaw",
    "LrSchedule",
    "Pauses",
    "ProjectLaw",
    "RunFacts",
    "ScheduleError",
    "Series",
    "Setting",
    "Shape",
    "advise",
    "checkpoint_waste",
    "count_failures",
    "count_restarts",
    "finished_curve",
    "fit_project_law",
    "forecast_eta",
    "forecast_final_loss",
    "forecast_run",
    "goodput",
    "idle_gpu_seconds",
    "lr_areas",
    "planned_rates",
    "rank_order",
    "success_probability",
    "young_daly_interval",
]
