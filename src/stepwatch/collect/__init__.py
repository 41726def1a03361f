"""Sources of samples on a node (host, GPU, logs, exporters) and the agent that ships them.

Every source meets one contract (``Source``: ``read(now) -> Reading``); the
``Agent`` schedules them and feeds the same pipeline the SDK uses.
"""

from ._agent import SOURCE_ERRORS, Agent
from ._exporters import DCGM_EXPORTER, DEFAULT_MAPPING, NODE_EXPORTER, NVIDIA_GPU_EXPORTER
from ._fake_nvml import FakeNvml
from ._fake_nvml_gpu import FakeGpu, ManualClock
from ._fake_nvml_script import FakeScriptError
from ._gpu import GpuSource, GpuUnavailable, open_gpu
from ._host import HostSource
from ._lines import LineGrouper
from ._log_metrics import LOG_FORMATS, PARSE_ERRORS, MetricLines, StepMetrics
from ._pump import OutputPump
from ._scrape import ScrapeSource
from ._scrape_rules import (
    BusyPercent,
    CodeChanges,
    CounterEvents,
    Difference,
    Gauge,
    LabelLookup,
    Rate,
    Rule,
    Total,
)
from ._setup import AgentOptions, default_spool_root, open_agent
from ._source import Flushes, Reading, Sample, Source
from ._tail import LogTail

__all__ = [
    "DCGM_EXPORTER",
    "DEFAULT_MAPPING",
    "LOG_FORMATS",
    "NODE_EXPORTER",
    "NVIDIA_GPU_EXPORTER",
    "PARSE_ERRORS",
    "SOURCE_ERRORS",
    "Agent",
    "AgentOptions",
    "BusyPercent",
    "CodeChanges",
    "CounterEvents",
    "Difference",
    "FakeGpu",
    "FakeNvml",
    "FakeScriptError",
    "Flushes",
    "Gauge",
    "GpuSource",
    "GpuUnavailable",
    "HostSource",
    "LabelLookup",
    "LineGrouper",
    "LogTail",
    "ManualClock",
    "MetricLines",
    "OutputPump",
    "Rate",
    "Reading",
    "Rule",
    "Sample",
    "ScrapeSource",
    "Source",
    "StepMetrics",
    "Total",
    "default_spool_root",
    "open_agent",
    "open_gpu",
]
