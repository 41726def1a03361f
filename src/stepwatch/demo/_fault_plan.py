"""The faults of one simulated run, placed on its cluster and applied to what it logs, and the
ground truth they leave (labels in the scenario format)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..detect import Label
from ._fault_effects import (
    IO_LINE,
    NCCL_LINE,
    NCCL_TIMEOUT_S,
    NONFINITE_LINE,
    OOM_LINE,
    TIMING_KINDS,
    crossing_s,
    edit_gpu,
    edit_host,
    hung,
    slowed,
    xid_line,
)
from ._faults import FAULT_SPECS, Fault, PlacedFault
from ._hardware import HOST_MEM_TOTAL_BYTES, HardwareSample
from ._shape import TrainingShape
from ._training import StepMetrics, TrainingSim, rng_for

__all__ = ["FaultPlan"]

#: Seed streams of the faults' own noise (the simulation's streams are 0-2).
STREAM_FAULTS, STREAM_FAULT_STEPS = 3, 4
#: The faults that edit training steps, counted from the first step they touch.
STEP_KINDS = (
    "nonfinite",
    "loss_spike",
    "loss_divergence",
    "loss_plateau",
    "grad_explosion",
    "grad_vanishing",
    *TIMING_KINDS,
)
GPU_EDITS = ("gpu_thermal", "gpu_memory_pressure", "gpu_underutilized", "gpu_power_anomaly")
HOST_EDITS = ("host_memory_leak", "cpu_saturation", "disk_full")
#: Free disk below this is full (the pack's floor, 10 GiB).
DISK_FLOOR_BYTES = 10 * 1024**3


@dataclass(slots=True)
class _Touch:
    """The steps a fault has edited: the first one, when it began, when the last one began,
    and when the fault first showed in what was logged."""

    first: int
    first_t: float
    last_t: float
    seen: float


class FaultPlan:
    """The faults of one simulated run, applied to what it logs; ``labels`` is their truth."""

    def __init__(self, shape: TrainingShape, faults: Sequence[Fault] = ()) -> None:
        self.shape = shape
        self.faults = tuple(faults)
        self._active = [self._place(f) for f in self.faults]
        self._touched: dict[int, _Touch] = {}
        self._starts: list[float] = []  # when each step began, as fed
        self._base: dict[int, float] = {}  # per host fault: its first reading of what it edits
        self._trend = TrainingSim(shape).loss_trend  # the healthy loss, without its noise
        self._down_at: dict[int, float] = {}
        for a in self._active:
            if a.kind == "node_down":
                self._down_at[a.node] = min(a.at, self._down_at.get(a.node, math.inf))
        self._hang_at = min(self._down_at.values(), default=math.inf)

    def _lost_at(self, a: PlacedFault) -> float:
        """When the node a fault is on goes down (inf: never): nothing shows it from then on."""
        if a.spec.scope == "run" or a.kind == "node_down":
            return math.inf
        return self._down_at.get(a.node, math.inf)

    def __bool__(self) -> bool:
        return bool(self._active)

    def _place(self, f: Fault) -> PlacedFault:
        s = self.shape
        if f.kind == "node_down" and s.nodes < 2:
            raise ValueError("fault node_down needs at least 2 nodes: a lost node is told by peers")
        if f.kind == "sync_latency" and s.nodes < 3:
            raise ValueError("fault sync_latency needs at least 3 nodes: one node against peers")
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
        spec = FAULT_SPECS[f.kind]
        duration = f.duration_s if f.duration_s is not None else spec.duration_s
        steps = None
        if spec.steps is not None:
            steps = spec.steps if duration is None else max(1, round(duration / s.step_s))
            duration = None
        end = f.at_s if not spec.lasting else f.at_s + (duration or math.inf)
        if f.kind in ("node_down", "gpu_errors"):
            end = math.inf
        rank = node * s.gpus_per_node + gpu
        return PlacedFault(f.kind, f.at_s, end, node, gpu, rank, f.size, steps)

    @property
    def placed(self) -> list[PlacedFault]:
        return list(self._active)

    def starting(self, t0: float, t1: float) -> list[PlacedFault]:
        """The faults that begin in (t0, t1]: the moments to act on."""
        return [a for a in self._active if t0 < a.at <= t1]

    def down_nodes(self) -> frozenset[int]:
        """The nodes that stop reporting at some point."""
        return frozenset(a.node for a in self._active if a.kind == "node_down")

    def lines(self, t0: float, t1: float, step: int) -> list[tuple[int, str]]:
        """The log lines (rank, text) the faults write in (t0, t1]; ``step`` is the current one.

        A lost node's peers hang in their next collective until NCCL's watchdog gives up on it.
        """
        out = [(a.rank, line) for a in self.starting(t0, t1) if (line := self._line(a, step))]
        if t0 < self._hang_at + NCCL_TIMEOUT_S <= t1:
            s = self.shape
            waiting = [n for n in range(s.nodes) if n not in self._down_at]
            out += [
                (n * s.gpus_per_node, NCCL_LINE.format(rank=n * s.gpus_per_node)) for n in waiting
            ]
        return out

    def _line(self, a: PlacedFault, step: int) -> str | None:
        gpu = a.gpu
        if a.kind == "log_oom":
            return OOM_LINE.format(gpu=gpu)
        if a.kind == "log_nccl":
            return NCCL_LINE.format(rank=a.rank)
        if a.kind == "log_io_error":
            return IO_LINE.format(step=step)
        if a.kind == "log_nonfinite":
            return NONFINITE_LINE.format(epoch=round(step / self.shape.steps_per_epoch, 2))
        if a.kind in ("log_gpu_error", "gpu_errors"):
            return xid_line(round(a.size) if a.kind == "gpu_errors" else 79, gpu)
        return None

    def step(self, m: StepMetrics, t: float) -> StepMetrics:
        """Step ``m`` as the faults on at ``t`` (when it began, in seconds) leave it.

        Steps are fed in order: a fault counts its steps from the first one it touches. From
        the moment a node is lost no step ends: every other rank waits for it.
        """
        if m.step == len(self._starts):
            self._starts.append(t)
        if t >= self._hang_at:
            return hung(m)
        out = m
        for i, a in enumerate(self._active):
            if a.kind not in STEP_KINDS or not a.on(t) or t >= self._lost_at(a):
                continue
            touch = self._touched.get(i)
            since = 0 if touch is None else m.step - touch.first
            if a.steps is not None and since >= a.steps:
                continue
            edited = self._edit_step(a, out, since if touch else 0, m.step - since)
            if edited is out:
                continue
            if touch is None:
                seen = t + edited.duration_s if a.kind == "checkpoint_slow" else t
                self._touched[i] = _Touch(m.step, t, t, seen)
            else:
                touch.last_t = t
            out = edited
        return out

    def _edit_step(self, a: PlacedFault, m: StepMetrics, since: int, first: int) -> StepMetrics:
        """One fault's edit of a step, ``since`` steps after the first it touched (``first``)."""
        if a.kind in TIMING_KINDS:
            return slowed(m, a, self.shape.gpus_per_node)
        train = dict(m.train)
        if a.kind == "nonfinite":
            train["train.loss"], train["train.grad_norm"] = math.nan, math.inf
        elif a.kind == "loss_spike":
            decay = math.exp(-4 * since / a.steps) if a.steps else 0.0
            train["train.loss"] *= 1 + a.size * decay
        elif a.kind == "loss_divergence":
            train["train.loss"] *= self._stalled(first, m.step) * (1 + a.size * since)
        elif a.kind == "loss_plateau":
            train["train.loss"] *= a.size + (1 - a.size) * self._stalled(first, m.step)
        elif a.kind == "grad_explosion":
            train["train.grad_norm"] *= a.size
        elif a.kind == "grad_vanishing":
            noise = rng_for(self.shape.seed, STREAM_FAULT_STEPS, m.step).normal(0, 0.2)
            train["train.grad_norm"] = a.size * math.exp(float(noise))
            train["train.loss"] *= self._stalled(first, m.step)
        return dataclasses.replace(m, train=train)

    def _stalled(self, first: int, step: int) -> float:
        """The factor that holds the healthy loss at its level of step ``first``."""
        return float(self._trend(first) / self._trend(step))

    def hardware(self, sample: HardwareSample, t: float, index: int) -> HardwareSample:
        """Reading number ``index``, taken ``t`` seconds in, as the faults on then leave it."""
        on = [
            (i, a)
            for i, a in enumerate(self._active)
            if a.on(t) and (a.kind in GPU_EDITS or a.kind in HOST_EDITS or a.kind == "gpu_errors")
        ]
        if not on:
            return sample
        gpu, host = dict(sample.gpu), dict(sample.host)
        noise = rng_for(self.shape.seed, STREAM_FAULTS, index).normal(0, 0.3, len(on))
        for (i, a), jitter in zip(on, noise.tolist(), strict=True):
            if a.kind in HOST_EDITS:
                base = self._base.setdefault(i, self._base_of(a, host))
                edit_host(host, a, t - a.at, base)
            if a.kind in GPU_EDITS or a.kind == "gpu_errors":
                edit_gpu(gpu, a, t - a.at, jitter)
        return HardwareSample(gpu=gpu, host=host)

    @staticmethod
    def _base_of(a: PlacedFault, host: dict) -> float:
        name = "host.disk_free_bytes" if a.kind == "disk_full" else "host.mem_used_bytes"
        return float(host[name][a.node])

    def labels(self, origin: float, end_s: float) -> list[Label]:
        """The ground truth of the faults that reached the data before ``end_s`` (seconds
        after the run started at ``origin``, data time), in the scenario format. A fault that
        stays on the healthy side of its kind's line leaves none."""
        out = []
        for i, a in sorted(enumerate(self._active), key=lambda ia: ia[1].at):
            if not self._past_line(i, a, end_s):
                continue
            span = self._span(i, a, end_s)
            if span is None:
                continue
            start, seen, end = span
            lost = self._lost_at(a)
            if seen >= lost or seen >= end_s:  # its node went down before it could show
                continue
            out.append(
                Label(
                    a.kind,
                    self._entity(a),
                    origin + start,
                    origin + min(end, lost),
                    origin + self._deadline(i, a, seen),
                    a.spec.also,
                )
            )
        out += self._watchdog_labels(origin, end_s)
        return out

    def _span(self, i: int, a: PlacedFault, end_s: float) -> tuple[float, float, float] | None:
        """(start, when it becomes visible, end) of a fault, or None if it never showed."""
        end = min(a.end, end_s)
        if a.kind in STEP_KINDS:  # from the first step it touched
            touch = self._touched.get(i)
            if touch is None:
                return None
            end = touch.last_t if a.steps is not None else end
            return touch.first_t, touch.seen, end
        if a.at >= end_s:
            return None
        seen = a.at
        if a.kind in ("gpu_thermal", "gpu_memory_pressure"):
            seen += crossing_s(a, a.spec.line or 0.0)
        return a.at, seen, end

    def _past_line(self, i: int, a: PlacedFault, end_s: float) -> bool:
        """Whether a fault crosses its kind's line; a disk that fills slower than the pack's
        horizon still does once it reaches the floor within the run."""
        if a.spec.crosses(a.size):
            return True
        if a.kind != "disk_full" or i not in self._base:
            return False
        hours = a.size * (1 - DISK_FLOOR_BYTES / max(self._base[i], DISK_FLOOR_BYTES))
        return a.at + hours * 3600 < end_s

    def _deadline(self, i: int, a: PlacedFault, seen: float) -> float:
        """By when a fault that shows at ``seen`` should be found: a count of steps after the
        first it touched (pauses included), or seconds; a resource running out, before half
        the time it has left is gone."""
        spec = a.spec
        if spec.deadline_steps is not None:
            last = self._touched[i].first + spec.deadline_steps
            if last < len(self._starts):
                return self._starts[last]
            return self._starts[-1] + (last - len(self._starts) + 1) * self.shape.step_s
        if a.kind == "disk_full":
            return seen + 0.5 * a.size * 3600
        if a.kind == "host_memory_leak" and i in self._base and a.size > 0:
            hours = (HOST_MEM_TOTAL_BYTES / self._base[i] - 1) / (a.size / 100)
            return seen + min(spec.deadline_s, 0.5 * hours * 3600)
        return seen + spec.deadline_s

    def _watchdog_labels(self, origin: float, end_s: float) -> list[Label]:
        """The NCCL watchdog's timeout on the lost node's peers: one run-wide log fault."""
        at = self._hang_at + NCCL_TIMEOUT_S
        if at >= end_s:
            return []
        return [Label("log_nccl", {}, origin + at, origin + at, origin + at + 60, ("node_down",))]

    def _entity(self, a: PlacedFault) -> dict[str, str | int]:
        node = self.shape.node_name(a.node)
        scope = a.spec.scope
        if scope == "run":
            return {}
        if scope == "rank":
            return {"node": node, "gpu": a.gpu, "rank": a.rank}
        if scope == "gpu":
            return {"node": node, "gpu": a.gpu}
        return {"node": node}
