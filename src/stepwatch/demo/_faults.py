"""Faults injected into the simulated job, and the ground truth each one leaves (its label).

A fault edits what the simulation hands out at the moment it is logged (a step's metrics, a
hardware reading, which nodes still report, an extra log line), never the simulation's own
state: the healthy run underneath stays pure in (seed, index), and a fault that ends leaves
the run as it would have been.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..detect import Label
from ._hardware import GPU_MEM_TOTAL_BYTES, HardwareSample
from ._shape import TrainingShape
from ._training import StepMetrics, TrainingSim, rng_for

__all__ = [
    "FAULT_KINDS",
    "FAULT_PRESETS",
    "OOM_LINE",
    "Fault",
    "FaultPlan",
    "PlacedFault",
    "fault_preset",
]

#: Seed stream of the faults' own noise (the simulation's streams are 0-2).
STREAM_FAULTS = 3

RUN_KINDS = ("nonfinite", "loss_spike", "loss_divergence")
GPU_KINDS = ("gpu_thermal", "gpu_memory_pressure")
NODE_KINDS = ("node_down", "log_oom")
FAULT_KINDS = (*RUN_KINDS, "straggler", *GPU_KINDS, *NODE_KINDS)

#: When a fault begins unless told: after the learning-rate warm-up of the default demo.
DEFAULT_AT_S = 60.0
#: How long a burst of non-finite steps lasts unless told; most faults last until the run ends.
DEFAULT_DURATION_S = {"nonfinite": 10.0}
#: A loss spike lasts this many steps unless told (a duration counts in nominal steps): a bad
#: batch is a matter of steps, and an evaluation pause must not swallow it.
SPIKE_STEPS = 20
#: The faults that edit training steps, counted from the first step they touch.
STEP_KINDS = (*RUN_KINDS, "straggler")
#: Kinds without a duration: a log line is a moment, a lost node does not come back.
NO_DURATION = ("log_oom", "node_down")

#: A straggler's forward and backward take this much longer than its own healthy pace.
STRAGGLER_FACTOR = 1.5
#: A loss spike adds this share of the loss at its peak, decaying over the spike's steps.
SPIKE_HEIGHT = 1.0
#: A diverging loss stops falling and grows by this share of its level at the fault's first step
#: per step (were it only to grow on top of the healthy fall, a divergence in the first minutes
#: would hide behind the steep early fall for hundreds of steps).
DIVERGENCE_PER_STEP = 0.001
#: A failing fan: the GPU heats from THERMAL_FROM_C at THERMAL_RATE_C_S to THERMAL_MAX_C.
THERMAL_FROM_C, THERMAL_RATE_C_S, THERMAL_MAX_C = 70.0, 0.1, 93.0
#: NVML clocks-event reason: hardware thermal slowdown, set once the GPU is this hot.
THROTTLE_HW_THERMAL, THROTTLE_AT_C = 0x40, 85.0
#: A growing allocation: GPU memory climbs from MEM_FROM to MEM_TO of total over MEM_RAMP_S.
MEM_FROM, MEM_TO, MEM_RAMP_S, MEM_PRESSURE = 0.70, 0.96, 120.0, 0.90
OOM_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU {gpu} has a "
    "total capacity of 79.10 GiB of which 1.95 GiB is free."
)

# By when each kind should be found, after the moment it becomes visible (ANOMALIES.md: a lost
# node within 2 minutes, heat within 5 minutes of passing 85 °C; a diverging loss "over hundreds
# of steps").
_DEADLINE_S = {
    "nonfinite": 60.0,
    "loss_spike": 60.0,
    "straggler": 180.0,
    "gpu_thermal": 300.0,
    "gpu_memory_pressure": 120.0,
    "node_down": 120.0,
    "log_oom": 60.0,
}
DIVERGENCE_DEADLINE_STEPS = 600
# What else a fault makes fire, as the simulation plays it: every rank waits for a straggler
# (slower steps, idle peers, a GPU drawing more than the others of its node); a diverging loss
# climbs above its recent baseline; an infinite gradient norm is far above its own.
_ALSO = {
    "nonfinite": ("grad_explosion",),
    "loss_divergence": ("loss_spike",),
    "straggler": ("step_time_regression", "gpu_underutilized", "gpu_power_anomaly", "sync_latency"),
}

_SPEC = re.compile(
    r"^(?P<kind>[a-z_]+)(?:@(?P<at>[0-9.]+)(?:\+(?P<dur>[0-9.]+))?)?(?::(?P<where>\S+))?$"
)
_WHERE = re.compile(r"^(?:node(?P<node>\d+)(?:/gpu(?P<gpu>\d+))?|rank(?P<rank>\d+))$")


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault to inject: its kind, when it begins (seconds after the run starts), for how
    long (None: the kind's default) and where (node, GPU or rank; None: the kind's default)."""

    kind: str
    at_s: float = DEFAULT_AT_S
    duration_s: float | None = None
    node: int | None = None
    gpu: int | None = None
    rank: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {self.kind!r}; one of {', '.join(FAULT_KINDS)}")
        if not (math.isfinite(self.at_s) and self.at_s >= 0):
            raise ValueError(f"fault {self.kind}: start must be >= 0 seconds, got {self.at_s}")
        if self.duration_s is not None:
            if self.kind in NO_DURATION:
                raise ValueError(f"fault {self.kind} has no duration")
            if not self.duration_s > 0:
                raise ValueError(f"fault {self.kind}: duration must be > 0, got {self.duration_s}")
        if self.kind in RUN_KINDS and (self.node, self.gpu, self.rank) != (None, None, None):
            raise ValueError(f"fault {self.kind} is about the whole run: it takes no place")

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``KIND[@SECONDS[+DURATION]][:PLACE]``, PLACE ``nodeN``, ``nodeN/gpuG`` or ``rankR``."""
        m = _SPEC.match(text.strip())
        if m is None:
            raise ValueError(f"expected KIND[@SECONDS[+DURATION]][:PLACE], got {text!r}")
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
        return cls(m["kind"], at, duration, **where)


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
    """A fault placed on the cluster: every place resolved, its end known (inf: never ends).

    Times are seconds after the run starts.
    """

    kind: str
    at: float
    end: float
    node: int
    gpu: int
    rank: int
    steps: int | None = None  # a fault counted in steps: how many it touches

    def on(self, t: float) -> bool:
        return self.at <= t < self.end

    def text(self) -> str:
        """The fault as a person reads it."""
        if self.kind in RUN_KINDS:
            where = "(whole run)"
        elif self.kind == "straggler":
            where = f"on rank {self.rank}"
        elif self.kind in GPU_KINDS:
            where = f"on node{self.node}/gpu{self.gpu}"
        else:
            where = f"on node{self.node}"
        if self.kind == "log_oom":
            until = ""
        elif self.steps is not None:
            until = f" for {self.steps} steps"
        else:
            until = " to the end" if math.isinf(self.end) else f" to {self.end:g} s"
        return f"{self.kind} {where} from {self.at:g} s{until}"


class FaultPlan:
    """The faults of one simulated run, applied to what it logs; ``labels`` is their truth."""

    def __init__(self, shape: TrainingShape, faults: Sequence[Fault] = ()) -> None:
        self.shape = shape
        self.faults = tuple(faults)
        self._active = [self._place(f) for f in self.faults]
        # Per fault that edits steps: (first step, its start, the last step's start) touched.
        self._touched: dict[int, tuple[int, float, float]] = {}
        self._down_at: dict[int, float] = {}
        self._trend = TrainingSim(shape).loss_trend  # the healthy loss, without its noise
        for a in self._active:
            if a.kind == "node_down":
                self._down_at[a.node] = min(a.at, self._down_at.get(a.node, math.inf))

    def _lost_at(self, a: PlacedFault) -> float:
        """When the node a fault is on goes down (inf: never): nothing shows it from then on."""
        if a.kind in RUN_KINDS or a.kind == "node_down":
            return math.inf
        return self._down_at.get(a.node, math.inf)

    def __bool__(self) -> bool:
        return bool(self._active)

    def _place(self, f: Fault) -> PlacedFault:
        s = self.shape
        if f.kind == "node_down" and s.nodes < 2:
            raise ValueError("fault node_down needs at least 2 nodes: a lost node is told by peers")
        if f.rank is not None:
            if not 0 <= f.rank < s.ranks:
                raise ValueError(f"fault {f.kind}: no rank {f.rank} among {s.ranks}")
            node, gpu = divmod(f.rank, s.gpus_per_node)
        else:
            node = s.nodes - 1 if f.node is None else f.node
            gpu = 0 if f.gpu is None else f.gpu
            if not (0 <= node < s.nodes and 0 <= gpu < s.gpus_per_node):
                raise ValueError(
                    f"fault {f.kind}: no node{node}/gpu{gpu} in {s.nodes}x{s.gpus_per_node}"
                )
        if f.kind == "node_down" and node == 0:
            raise ValueError("fault node_down: node0 runs rank 0, which records the run")
        duration = f.duration_s if f.duration_s is not None else DEFAULT_DURATION_S.get(f.kind)
        steps = None
        if f.kind == "loss_spike":
            steps = SPIKE_STEPS if duration is None else max(1, round(duration / s.step_s))
            duration = None
        end = f.at_s if f.kind == "log_oom" else f.at_s + (duration or math.inf)
        return PlacedFault(f.kind, f.at_s, end, node, gpu, node * s.gpus_per_node + gpu, steps)

    @property
    def placed(self) -> list[PlacedFault]:
        return list(self._active)

    def starting(self, t0: float, t1: float) -> list[PlacedFault]:
        """The faults that begin in (t0, t1]: the moments to act on."""
        return [a for a in self._active if t0 < a.at <= t1]

    def down_nodes(self) -> frozenset[int]:
        """The nodes that stop reporting at some point."""
        return frozenset(a.node for a in self._active if a.kind == "node_down")

    def oom_line(self, rank: int) -> str:
        return OOM_LINE.format(gpu=rank % self.shape.gpus_per_node)

    def step(self, m: StepMetrics, t: float) -> StepMetrics:
        """Step ``m`` as the faults on at ``t`` (when it began, in seconds) leave it.

        Steps are fed in order: a fault counts its steps from the first one it touches.
        """
        train, touched = dict(m.train), False
        for i, a in enumerate(self._active):
            if a.kind not in STEP_KINDS or not a.on(t) or t >= self._lost_at(a):
                continue
            first, first_t, _ = self._touched.get(i, (m.step, t, t))
            since = m.step - first
            if a.steps is not None and since >= a.steps:
                continue
            self._touched[i] = (first, first_t, t)
            touched = True
            if a.kind == "nonfinite":
                train["train.loss"], train["train.grad_norm"] = math.nan, math.inf
            elif a.kind == "loss_spike":
                decay = math.exp(-4 * since / a.steps) if a.steps else 0.0
                train["train.loss"] *= 1 + SPIKE_HEIGHT * decay
            elif a.kind == "loss_divergence":
                stalled = float(self._trend(first) / self._trend(m.step))
                train["train.loss"] *= stalled * (1 + DIVERGENCE_PER_STEP * since)
            elif a.kind == "straggler":
                m = _slow_rank(m, a.rank, STRAGGLER_FACTOR)
                train["train.tokens_per_s"] = m.train["train.tokens_per_s"]
        return dataclasses.replace(m, train=train) if touched else m

    def hardware(self, sample: HardwareSample, t: float, index: int) -> HardwareSample:
        """Reading number ``index``, taken ``t`` seconds in, as the faults on then leave it."""
        on = [a for a in self._active if a.on(t) and a.kind in GPU_KINDS]
        if not on:
            return sample
        gpu = dict(sample.gpu)
        noise = rng_for(self.shape.seed, STREAM_FAULTS, index).normal(0, 0.3, len(on))
        for a, jitter in zip(on, noise.tolist(), strict=True):
            since, where = t - a.at, (a.node, a.gpu)
            if a.kind == "gpu_thermal":
                hot = min(THERMAL_FROM_C + THERMAL_RATE_C_S * since, THERMAL_MAX_C) + jitter
                temp = gpu["gpu.temp_c"] = gpu["gpu.temp_c"].copy()
                temp[where] = max(float(temp[where]), hot)
                if temp[where] >= THROTTLE_AT_C:
                    reasons = gpu["gpu.throttle_reasons"] = gpu["gpu.throttle_reasons"].copy()
                    reasons[where] = float(int(reasons[where]) | THROTTLE_HW_THERMAL)
            else:
                share = MEM_FROM + (MEM_TO - MEM_FROM) * min(since / MEM_RAMP_S, 1.0)
                mem = gpu["gpu.mem_used_bytes"] = gpu["gpu.mem_used_bytes"].copy()
                mem[where] = max(float(mem[where]), round(share * GPU_MEM_TOTAL_BYTES))
        return HardwareSample(gpu=gpu, host=sample.host)

    def labels(self, origin: float, end_s: float) -> list[Label]:
        """The ground truth of the faults that reached the data before ``end_s`` (seconds
        after the run started at ``origin``, data time), in the scenario format."""
        out = []
        for i, a in sorted(enumerate(self._active), key=lambda ia: ia[1].at):
            start, end = a.at, min(a.end, end_s)
            seen = a.at  # when the fault becomes visible in the data
            if a.kind in STEP_KINDS:  # from the first step it touched
                if i not in self._touched:
                    continue
                _, start, last = self._touched[i]
                seen, end = start, last if a.steps is not None else end
            elif a.at >= end_s:
                continue
            if a.kind == "gpu_thermal":
                seen += (THROTTLE_AT_C - THERMAL_FROM_C) / THERMAL_RATE_C_S
            elif a.kind == "gpu_memory_pressure":
                seen += MEM_RAMP_S * (MEM_PRESSURE - MEM_FROM) / (MEM_TO - MEM_FROM)
            if a.kind == "loss_divergence":
                deadline = seen + DIVERGENCE_DEADLINE_STEPS * self.shape.step_s
            else:
                deadline = seen + _DEADLINE_S[a.kind]
            lost = self._lost_at(a)
            if seen >= lost:  # its node went down before it could show
                continue
            end = min(end, lost)
            out.append(
                Label(
                    a.kind,
                    self._entity(a),
                    origin + start,
                    origin + end,
                    origin + deadline,
                    _ALSO.get(a.kind, ()),
                )
            )
        return out

    def _entity(self, a: PlacedFault) -> dict[str, str | int]:
        node = self.shape.node_name(a.node)
        if a.kind in RUN_KINDS:
            return {}
        if a.kind == "straggler":
            return {"node": node, "gpu": a.gpu, "rank": a.rank}
        if a.kind in GPU_KINDS:
            return {"node": node, "gpu": a.gpu}
        return {"node": node}


def _slow_rank(m: StepMetrics, rank: int, factor: float) -> StepMetrics:
    """The step with one rank computing ``factor`` times longer: every rank leaves the
    all-reduce when that one arrives, so the others' communication time grows by the wait."""
    t = m.timings
    data, compute = t["train.data_time_s"], t["train.compute_time_s"].copy()
    ready = compute + data
    ring = t["train.comm_time_s"] - (ready.max() - ready)
    compute[rank] *= factor
    ready = compute + data
    train_s = float(ready.max() + ring.max())
    pause = m.eval_s + m.ckpt_s
    step_time = t["train.step_time_s"] * (train_s + pause) / (m.train_s + pause)
    timings = {
        "train.data_time_s": data,
        "train.compute_time_s": compute,
        "train.comm_time_s": ready.max() - ready + ring,
        "train.step_time_s": step_time,
    }
    tokens = m.train["train.tokens_per_s"] * float(t["train.step_time_s"][0] / step_time[0])
    return dataclasses.replace(
        m,
        train={**m.train, "train.tokens_per_s": tokens},
        timings=timings,
        busy=compute / train_s,
        train_s=train_s,
    )
