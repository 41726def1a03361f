"""What the analysis of one trace says, as plain values (and as the JSON `stepwatch trace
--json` prints)."""

from __future__ import annotations

from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "Advice",
    "Breakdown",
    "CpuSide",
    "Launches",
    "OpStat",
    "Overlap",
    "TraceReport",
]


@dataclass(frozen=True)
class OpStat:
    """An operator (or kernel, or Python function) by self time: ``share`` of its table's
    total; ``kind`` is a kernel's compute/comm/memcpy/memset, an operator's category."""

    name: str
    self_us: float
    calls: int
    share: float
    kind: str = ""


@dataclass(frozen=True)
class Breakdown:
    """Seconds of the timeline, each instant counted once: compute, then communication not
    hidden under compute, then memory copies under neither, then idle. ``basis`` "gpu": the
    GPUs' kernels, summed over devices; "cpu" (a trace without GPU events): the training
    thread's operators, where communication and copies come first, as they nest in others."""

    basis: str
    compute: float
    comm: float
    memcpy: float
    idle: float
    span_s: float
    devices: int


@dataclass(frozen=True)
class Overlap:
    """How much of the GPUs' communication ran while they computed."""

    comm_s: float
    overlapped_s: float
    share: float | None


@dataclass(frozen=True)
class Launches:
    """Kernel launches from the CPU and how long kernels took to start after them."""

    launches: int
    graph_launches: int
    kernels: int
    tiny_kernels: int
    tiny_under_us: float
    tiny_share: float
    delay_matched: int
    delay_mean_us: float | None
    delay_p50_us: float | None
    delay_p90_us: float | None
    delay_max_us: float | None
    sync_s: float


@dataclass(frozen=True)
class CpuSide:
    """The training thread (the one busiest in operators): time in operators, time outside
    any (Python, waiting), data loading, and the Python functions by self time when the
    profile recorded stacks."""

    thread: str
    busy_s: float
    outside_ops_s: float
    dataloader_s: float
    python_functions: list[OpStat]


@dataclass(frozen=True)
class Advice:
    """One thing to change, why (the figures behind it) and what it would do."""

    kind: str
    message: str
    numbers: dict[str, float]


@dataclass(frozen=True)
class TraceReport:
    """One trace analysed. ``collective_us`` holds the durations of its collectives in the
    order they started (for the skew across ranks; not printed)."""

    path: str
    rank: int | None
    world_size: int | None
    steps: int
    events: int
    late_events: int
    breakdown: Breakdown
    overlap: Overlap | None
    ops: list[OpStat]
    kernels: list[OpStat]
    launches: Launches | None
    cpu: CpuSide | None
    collectives: int
    advice: list[Advice]
    collective_us: array[float] = field(default_factory=lambda: array("d"), repr=False)

    def to_json(self) -> dict[str, Any]:
        """The report as `stepwatch trace --json` prints it (``kind`` "trace")."""
        out = {"kind": "trace", **asdict(self)}
        del out["collective_us"]
        breakdown = out.pop("breakdown")
        out["basis"] = breakdown.pop("basis")
        out["span_s"] = breakdown.pop("span_s")
        out["devices"] = breakdown.pop("devices")
        out["breakdown"] = breakdown
        return out
