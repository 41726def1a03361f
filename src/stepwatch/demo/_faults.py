"""Faults the demo can inject: one kind for every kind of the built-in pack, each with a
documented default magnitude, where it may be placed, and the line it must cross to count.

A fault edits what the simulation hands out at the moment it is logged (a step's metrics, a
hardware reading, which nodes still report, an extra log line), never the simulation's own
state: the healthy run underneath stays pure in (seed, index), and a fault that ends leaves
the run as it would have been (``_fault_plan`` applies them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = [
    "DEFAULT_AT_S",
    "FAULT_KINDS",
    "FAULT_PRESETS",
    "FAULT_SPECS",
    "Fault",
    "FaultKind",
    "PlacedFault",
    "fault_preset",
]

#: When a fault begins unless told: after the learning-rate warm-up of the default demo.
DEFAULT_AT_S = 60.0
_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class FaultKind:
    """What one kind of fault is: where it goes, its magnitude, and by when it must be found.

    ``scope`` is ``run``, ``rank``, ``gpu`` or ``node``. ``magnitude`` is the default size (None:
    the kind has none), in ``unit``, allowed within ``bounds`` (inclusive). ``line`` is the
    documented threshold (ANOMALIES.md or the pack's own): a fault whose magnitude stays on the
    healthy side of it (``above``: faulty above the line) leaves no label, and any alert of its
    kind on it is a false one. It should be found ``deadline_s`` (or ``deadline_steps``) after
    it becomes visible; ``steps`` counts a fault in steps, ``duration_s`` bounds one unless
    told; ``also`` are the kinds its secondary symptoms fire, as the simulation plays it.
    """

    scope: str
    deadline_s: float = 60.0
    magnitude: float | None = None
    unit: str = ""
    bounds: tuple[float, float] = (0.0, math.inf)
    line: float | None = None
    above: bool = True
    deadline_steps: int | None = None
    steps: int | None = None
    duration_s: float | None = None
    lasting: bool = True  # False: a moment (a log line, a lost node, an error counted once)
    also: tuple[str, ...] = ()

    def crosses(self, magnitude: float) -> bool:
        """Whether a fault of this magnitude is past the line (always, for kinds without one)."""
        if self.line is None:
            return True
        return magnitude > self.line if self.above else magnitude < self.line


_WAITED_ON = ("step_time_regression", "gpu_underutilized", "gpu_power_anomaly", "sync_latency")
#: Every kind, in the order of the pack: the deadlines are ANOMALIES.md's and the scenario
#: README's (a lost node within 2 minutes, heat within 5 minutes of 80 °C, a divergence "over
#: hundreds of steps", a `for` plus time to tell the change for sustained conditions); a
#: resource running out (disk, host memory) before half the time it has left is gone.
FAULT_SPECS: dict[str, FaultKind] = {
    "nonfinite": FaultKind("run", duration_s=10.0, also=("grad_explosion",)),
    "loss_spike": FaultKind("run", magnitude=1.0, unit="share of the loss added", steps=20),
    "loss_divergence": FaultKind(
        "run", deadline_steps=600, magnitude=0.001, unit="growth a step", also=("loss_spike",)
    ),
    "loss_plateau": FaultKind(
        "run", deadline_steps=2000, magnitude=0.0, unit="share of the fall kept", bounds=(0, 0.99)
    ),
    "grad_explosion": FaultKind(
        "run", deadline_steps=10, magnitude=100.0, unit="x grad norm", bounds=(1.01, 1e9), steps=5
    ),
    "grad_vanishing": FaultKind(
        "run",
        deadline_steps=100,
        magnitude=1e-9,
        unit="grad norm",
        bounds=(0, 1e3),
        line=1e-7,
        above=False,
        also=("loss_plateau",),
    ),
    "step_time_regression": FaultKind("run", 720.0, 1.5, "x step time", (1.0, 100.0), line=1.2),
    "straggler": FaultKind(
        "rank", 180.0, 1.5, "x compute time", (1.0, 100.0), 1.2, also=_WAITED_ON
    ),
    "dataloader_bottleneck": FaultKind(
        "node",
        600.0,
        0.5,
        "data wait / compute",
        (0, 100.0),
        0.2,
        also=("straggler", *_WAITED_ON),
    ),
    "sync_latency": FaultKind(
        "node",
        300.0,
        3.0,
        "x own collective time",
        (1.0, 100.0),
        2.0,
        also=("step_time_regression", "straggler", "gpu_underutilized"),
    ),
    "gpu_underutilized": FaultKind(
        "gpu",
        720.0,
        40.0,
        "% utilization",
        (0, 100.0),
        60.0,
        above=False,
        also=("gpu_power_anomaly",),
    ),
    "gpu_thermal": FaultKind("gpu", 300.0, 93.0, "°C settled", (30.0, 120.0), 80.0),
    "gpu_power_anomaly": FaultKind("gpu", 600.0, 0.35, "share swung", (0, 0.95), 0.2),
    "gpu_memory_pressure": FaultKind("gpu", 120.0, 0.96, "share of memory", (0, 1.0), 0.9),
    "gpu_errors": FaultKind(
        "gpu",
        30.0,
        79.0,
        "Xid code (48: uncorrectable ECC)",
        (1, 999),
        lasting=False,
        also=("log_gpu_error",),
    ),
    "host_memory_leak": FaultKind("node", _HOUR, 20.0, "% a hour", (0, 1e6), 5.0),
    "cpu_saturation": FaultKind("node", 360.0, 99.5, "% busiest core", (0, 100.0), 98.0),
    "checkpoint_slow": FaultKind(
        "node",
        60.0,
        100.0,
        "MB/s written",
        (0.1, 1e6),
        200.0,
        above=False,
        also=("step_time_regression", "gpu_underutilized"),
    ),
    "disk_full": FaultKind("node", math.inf, 1.0, "hours to full", (0.01, 1e4), 2.0, above=False),
    "node_down": FaultKind(
        "node",
        120.0,
        lasting=False,
        also=("log_nccl", "straggler", "gpu_underutilized", "gpu_power_anomaly", "sync_latency"),
    ),
    "log_oom": FaultKind("node", lasting=False, also=("gpu_memory_pressure",)),
    "log_nccl": FaultKind("node", lasting=False, also=("node_down",)),
    "log_io_error": FaultKind("node", lasting=False),
    "log_nonfinite": FaultKind("run", lasting=False),
    "log_gpu_error": FaultKind("node", lasting=False),
}
FAULT_KINDS = tuple(FAULT_SPECS)

_SPEC = re.compile(
    r"^(?P<kind>[a-z_]+)(?:@(?P<at>[0-9.]+)(?:\+(?P<dur>[0-9.]+))?)?"
    r"(?::(?P<where>[^*\s]+))?(?:\*(?P<size>\S+))?$"
)
_WHERE = re.compile(r"^(?:node(?P<node>\d+)(?:/gpu(?P<gpu>\d+))?|rank(?P<rank>\d+))$")
SPEC_TEXT = "KIND[@SECONDS[+DURATION]][:PLACE][*MAGNITUDE]"


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault to inject: its kind, when it begins (seconds after the run starts), for how
    long (None: the kind's default), where (node, GPU or rank; None: the kind's default) and
    how strong (None: the kind's default magnitude, see ``FAULT_SPECS``)."""

    kind: str
    at_s: float = DEFAULT_AT_S
    duration_s: float | None = None
    node: int | None = None
    gpu: int | None = None
    rank: int | None = None
    magnitude: float | None = None

    def __post_init__(self) -> None:
        spec = FAULT_SPECS.get(self.kind)
        if spec is None:
            raise ValueError(f"unknown fault {self.kind!r}; one of {', '.join(FAULT_KINDS)}")
        if not (math.isfinite(self.at_s) and self.at_s >= 0):
            raise ValueError(f"fault {self.kind}: start must be >= 0 seconds, got {self.at_s}")
        if self.duration_s is not None:
            if not spec.lasting:
                raise ValueError(f"fault {self.kind} has no duration")
            if not self.duration_s > 0:
                raise ValueError(f"fault {self.kind}: duration must be > 0, got {self.duration_s}")
        if spec.scope == "run" and (self.node, self.gpu, self.rank) != (None, None, None):
            raise ValueError(f"fault {self.kind} is about the whole run: it takes no place")
        if self.magnitude is not None:
            _check_magnitude(self.kind, spec, self.magnitude)

    @property
    def size(self) -> float:
        """The magnitude in effect (the kind's default unless told; 0 for kinds without)."""
        if self.magnitude is not None:
            return self.magnitude
        return FAULT_SPECS[self.kind].magnitude or 0.0

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``KIND[@SECONDS[+DURATION]][:PLACE][*MAGNITUDE]``, PLACE ``nodeN``, ``nodeN/gpuG``
        or ``rankR``, e.g. ``straggler@300:rank5*1.25``."""
        m = _SPEC.match(text.strip())
        if m is None:
            raise ValueError(f"expected {SPEC_TEXT}, got {text!r}")
        where: dict[str, int] = {}
        if m["where"]:
            w = _WHERE.match(m["where"])
            if w is None:
                raise ValueError(f"{text!r}: a place is nodeN, nodeN/gpuG or rankR")
            where = {k: int(v) for k, v in w.groupdict().items() if v is not None}
        try:
            at = float(m["at"]) if m["at"] else DEFAULT_AT_S
            duration = float(m["dur"]) if m["dur"] else None
        except ValueError:
            raise ValueError(f"{text!r}: seconds must be numbers") from None
        try:
            size = float(m["size"]) if m["size"] else None
        except ValueError:
            raise ValueError(f"{text!r}: a magnitude after * must be a number") from None
        return cls(m["kind"], at, duration, magnitude=size, **where)


def _check_magnitude(kind: str, spec: FaultKind, value: float) -> None:
    if spec.magnitude is None:
        raise ValueError(f"fault {kind} takes no magnitude")
    low, high = spec.bounds
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(
            f"fault {kind}: magnitude ({spec.unit}) must be within {low:g}..{high:g}, got {value:g}"
        )


#: ``stepwatch demo --faults NAME``: ``tour`` (the default) gives every view something to show
#: within the first minutes, ``none`` is a healthy run.
FAULT_PRESETS = ("tour", "none")


def fault_preset(name: str, nodes: int, gpus_per_node: int) -> tuple[Fault, ...]:
    """The faults of a named preset, placed on a cluster of this size.

    The tour's alerts come a minute or so apart: a straggler (about 65 s in: the heatmap and
    the ranks), a loss spike (121 s: the loss chart), an out-of-memory line (150 s: the logs)
    and a GPU that heats until it throttles (200 s: the hardware view).
    """
    if name not in FAULT_PRESETS:
        raise ValueError(f"unknown fault preset {name!r}; one of {', '.join(FAULT_PRESETS)}")
    if name == "none":
        return ()
    return (
        Fault("gpu_thermal", 20.0, node=nodes - 1, gpu=gpus_per_node - 1),
        Fault("straggler", 60.0, rank=nodes * gpus_per_node // 2),
        Fault("loss_spike", 120.0),
        Fault("log_oom", 150.0, node=0),
    )


@dataclass(frozen=True, slots=True)
class PlacedFault:
    """A fault placed on the cluster: every place resolved, its end known (inf: never ends),
    its magnitude in effect. Times are seconds after the run starts."""

    kind: str
    at: float
    end: float
    node: int
    gpu: int
    rank: int
    size: float = 0.0
    steps: int | None = None  # a fault counted in steps: how many it touches

    @property
    def spec(self) -> FaultKind:
        return FAULT_SPECS[self.kind]

    def on(self, t: float) -> bool:
        return self.at <= t < self.end

    def text(self) -> str:
        """The fault as a person reads it."""
        scope = self.spec.scope
        if scope == "run":
            where = "(whole run)"
        elif scope == "rank":
            where = f"on rank {self.rank}"
        elif scope == "gpu":
            where = f"on node{self.node}/gpu{self.gpu}"
        else:
            where = f"on node{self.node}"
        if not self.spec.lasting and self.kind != "node_down":
            until = ""
        elif self.steps is not None:
            until = f" for {self.steps} steps"
        else:
            until = " to the end" if math.isinf(self.end) else f" to {self.end:g} s"
        size = f" ({self.size:g} {self.spec.unit})" if self.spec.magnitude is not None else ""
        return f"{self.kind} {where} from {self.at:g} s{until}{size}"
