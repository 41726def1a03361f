"""`stepwatch demo`: a simulated multi-node training, watched live through the real pipeline."""

from ._hardware import GPU_METRICS, HOST_METRICS, HardwareSample, HardwareSim
from ._shape import TrainingShape
from ._training import Activity, Phase, StepMetrics, TrainingSim

__all__ = [
    "GPU_METRICS",
    "HOST_METRICS",
    "Activity",
    "HardwareSample",
    "HardwareSim",
    "Phase",
    "StepMetrics",
    "TrainingShape",
    "TrainingSim",
]
