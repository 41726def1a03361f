"""`stepwatch top`: a live terminal view of one run, fetched from a collector's HTTP API."""

from ._fetch import TopClient, TopError
from ._live import watch
from ._render import format_duration, render, sparkline
from ._snapshot import AlertRow, Forecast, GpuRow, Snapshot, StepTimes

__all__ = [
    "AlertRow",
    "Forecast",
    "GpuRow",
    "Snapshot",
    "StepTimes",
    "TopClient",
    "TopError",
    "format_duration",
    "render",
    "sparkline",
    "watch",
]
