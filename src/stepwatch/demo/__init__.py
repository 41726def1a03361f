"""`stepwatch demo`: a simulated multi-node training, watched live through the real pipeline,
with faults injected on demand or recorded as a labelled scenario."""

from ..model import GPU_METRICS, HOST_METRICS
from ._config import DemoConfig, DemoSummary
from ._driver import run_demo
from ._fault_plan import FaultPlan
from ._faults import FAULT_KINDS, FAULT_PRESETS, FAULT_SPECS, Fault, FaultKind, fault_preset
from ._hardware import HardwareSample, HardwareSim
from ._mess import Imperfections, as_sent, imperfect
from ._record import RecordedScenario, record_scenario
from ._shape import TrainingShape
from ._training import Activity, Phase, StepMetrics, TrainingSim

__all__ = [
    "FAULT_KINDS",
    "FAULT_PRESETS",
    "FAULT_SPECS",
    "GPU_METRICS",
    "HOST_METRICS",
    "Activity",
    "DemoConfig",
    "DemoSummary",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "HardwareSample",
    "HardwareSim",
    "Imperfections",
    "Phase",
    "RecordedScenario",
    "StepMetrics",
    "TrainingShape",
    "TrainingSim",
    "as_sent",
    "fault_preset",
    "imperfect",
    "record_scenario",
    "run_demo",
]
