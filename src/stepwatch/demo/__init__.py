"""`stepwatch demo`: a simulated multi-node training, watched live through the real pipeline."""

from ..model import GPU_METRICS, HOST_METRICS
from ._config import DemoConfig, DemoSummary
from ._driver import run_demo
from ._hardware import HardwareSample, HardwareSim
from ._shape import TrainingShape
from ._training import Activity, Phase, StepMetrics, TrainingSim

__all__ = [
    "GPU_METRICS",
    "HOST_METRICS",
    "Activity",
    "DemoConfig",
    "DemoSummary",
    "HardwareSample",
    "HardwareSim",
    "Phase",
    "StepMetrics",
    "TrainingShape",
    "TrainingSim",
    "run_demo",
]
