"""Simulated optimizer steps: a pure function of (seed, step), so a step can be replayed or edited.

The numbers follow a synchronous data-parallel job: every rank computes, waits
for data and joins an all-reduce that ends when the slowest rank arrives, so a
fast rank's communication time includes waiting for its peers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ._shape import GIB, TrainingShape

# Seed streams: independent random sequences for run constants, steps and hardware.
STREAM_CONSTANTS = 0
STREAM_STEP = 1
STREAM_HARDWARE = 2

#: Bytes a checkpoint holds per parameter: bf16 weights plus fp32 master weights and Adam moments.
CKPT_BYTES_PER_PARAM = 14
#: Checkpoints kept on disk; older ones are deleted as new ones land.
KEEP_CHECKPOINTS = 3
#: Below this nominal step length, checkpoint writes shrink with the step (pauses keep their ratio).
REAL_STEP_S = 0.5


class Phase(StrEnum):
    """What the GPUs are doing at a moment of a step's wall time."""

    TRAIN = "train"
    EVAL = "eval"
    CHECKPOINT = "checkpoint"


def rng_for(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    """A generator that depends only on (seed, stream, index), never on call order."""
    return np.random.default_rng([seed, stream, index])


@dataclass(frozen=True, slots=True)
class Activity:
    """What hardware sampling needs to know about the training at one moment."""

    phase: Phase
    busy: np.ndarray  # (ranks,): fraction of training time each GPU computes
    disk_write_bytes_per_s: np.ndarray  # (nodes,): checkpoint write throughput, 0 when idle
    ckpt_written_bytes: float  # per node, by the finished checkpoints still on disk


@dataclass(frozen=True, slots=True)
class StepMetrics:
    """Everything one optimizer step produces, before it is logged."""

    step: int
    train: dict[str, float]  # rank-0 metrics: loss, lr, grad norm, tokens/s
    timings: dict[str, np.ndarray]  # per-rank step/data/compute/comm seconds, shape (ranks,)
    busy: np.ndarray
    train_s: float
    eval_s: float  # 0 when no evaluation follows the step
    ckpt_write_s: np.ndarray  # (nodes,), all 0 when no checkpoint follows the step
    ckpt_bytes: float  # per node
    ckpt_written_before: float  # per node, by the earlier checkpoints still on disk
    val_loss: float | None
    epoch: int
    samples_seen: int

    @property
    def ckpt_s(self) -> float:
        return float(self.ckpt_write_s.max())

    @property
    def duration_s(self) -> float:
        """Wall time of the step including the evaluation and checkpoint pauses after it."""
        return self.train_s + self.eval_s + self.ckpt_s

    def phase_at(self, elapsed: float) -> Phase:
        if elapsed < self.train_s:
            return Phase.TRAIN
        if elapsed < self.train_s + self.eval_s:
            return Phase.EVAL
        return Phase.CHECKPOINT if self.ckpt_s > 0 else Phase.TRAIN

    def activity_at(self, elapsed: float) -> Activity:
        """The hardware's view of this step ``elapsed`` seconds after it began."""
        phase = self.phase_at(elapsed)
        rate = np.zeros_like(self.ckpt_write_s)
        if phase is Phase.CHECKPOINT:
            writing = elapsed - self.train_s - self.eval_s < self.ckpt_write_s
            rate[writing] = self.ckpt_bytes / self.ckpt_write_s[writing]
        return Activity(phase, self.busy, rate, self.ckpt_written_before)


@dataclass(frozen=True, slots=True)
class _RunConstants:
    """Per-run draws: the loss curve's shape, the cluster's speeds."""

    loss_floor: float
    loss_scale: float
    loss_exponent: float
    grad_level: float
    compute_frac: float
    allreduce_frac: float
    rank_speed: np.ndarray  # (ranks,)
    ckpt_bandwidth: np.ndarray  # (nodes,) bytes/s at a real step length

    @classmethod
    def draw(cls, shape: TrainingShape) -> _RunConstants:
        rng = rng_for(shape.seed, STREAM_CONSTANTS)
        return cls(
            loss_floor=float(rng.uniform(1.7, 2.3)),
            loss_scale=float(rng.uniform(7.0, 9.0)),
            loss_exponent=float(rng.uniform(0.3, 0.4)),
            grad_level=float(rng.uniform(0.3, 1.2)),
            compute_frac=float(rng.uniform(0.76, 0.82)),
            allreduce_frac=float(rng.uniform(0.09, 0.13)),
            rank_speed=1 + np.clip(rng.normal(0, 0.01, shape.ranks), -0.03, 0.03),
            ckpt_bandwidth=rng.uniform(1.0, 2.0, shape.nodes) * GIB,
        )


class TrainingSim:
    """Optimizer steps of one simulated run: ``step(k)`` is pure in (shape, k)."""

    def __init__(self, shape: TrainingShape) -> None:
        self.shape = shape
        self._c = _RunConstants.draw(shape)
        self.ckpt_bytes = shape.model_params * CKPT_BYTES_PER_PARAM / shape.nodes
        self._ckpt_speedup = max(1.0, REAL_STEP_S / shape.step_s)

    def loss_trend(self, k: int | np.ndarray) -> np.ndarray | float:
        """The noise-free loss: a power law in the number of steps seen."""
        c = self._c
        return c.loss_floor + c.loss_scale * (np.asarray(k) + 1.0) ** -c.loss_exponent

    def lr(self, k: int) -> float:
        """Linear warm-up to the peak, then cosine decay to 10% of it at the planned end."""
        s = self.shape
        if k < s.warmup_steps:
            return s.lr_max * (k + 1) / s.warmup_steps
        span = max(s.planned_total_steps - s.warmup_steps, 1)
        progress = min((k - s.warmup_steps) / span, 1.0)
        return s.lr_max * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))

    def is_eval_step(self, k: int) -> bool:
        return k > 0 and k % self.shape.eval_every == 0

    def is_ckpt_step(self, k: int) -> bool:
        return k > 0 and k % self.shape.ckpt_every == 0

    def checkpoints_before(self, k: int) -> int:
        """Checkpoints finished before step ``k`` began."""
        return (k - 1) // self.shape.ckpt_every if k > 0 else 0

    def step(self, k: int) -> StepMetrics:
        """Simulate optimizer step ``k`` (0-based) and the pauses that follow it."""
        if k < 0:
            raise ValueError(f"step must be >= 0, got {k}")
        rng = rng_for(self.shape.seed, STREAM_STEP, k)
        timings, busy, train_s = self._timings(rng)
        eval_s = self.shape.step_s * float(rng.uniform(19, 59)) if self.is_eval_step(k) else 0.0
        write_s = self._ckpt_write_s(rng) if self.is_ckpt_step(k) else np.zeros(self.shape.nodes)
        pause = eval_s + float(write_s.max())
        total = (train_s + pause) * (1 + rng.normal(0, 0.002, self.shape.ranks))
        timings["train.step_time_s"] = total
        return StepMetrics(
            step=k,
            train=self._train_metrics(k, rng, float(total[0])),
            timings=timings,
            busy=busy,
            train_s=train_s,
            eval_s=eval_s,
            ckpt_write_s=write_s,
            ckpt_bytes=self.ckpt_bytes if self.is_ckpt_step(k) else 0.0,
            ckpt_written_before=self.ckpt_bytes * min(self.checkpoints_before(k), KEEP_CHECKPOINTS),
            val_loss=self._val_loss(k, rng) if eval_s else None,
            epoch=k // self.shape.steps_per_epoch,
            samples_seen=(k + 1) * self.shape.global_batch,
        )

    def _timings(self, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
        """Per-rank phase times; everyone leaves the all-reduce when the slowest rank arrives."""
        s, c = self.shape, self._c
        compute = s.step_s * c.compute_frac * c.rank_speed * (1 + rng.normal(0, 0.02, s.ranks))
        data = s.step_s * 0.02 * np.exp(rng.normal(0, 0.3, s.ranks))
        ring = s.step_s * c.allreduce_frac * (1 + np.abs(rng.normal(0, 0.05, s.ranks)))
        ready = compute + data
        comm = ready.max() - ready + ring
        train_s = float(ready.max() + ring.max())
        timings = {
            "train.data_time_s": data,
            "train.compute_time_s": compute,
            "train.comm_time_s": comm,
        }
        return timings, compute / train_s, train_s

    def _train_metrics(
        self, k: int, rng: np.random.Generator, step_time: float
    ) -> dict[str, float]:
        s, c = self.shape, self._c
        trend = float(self.loss_trend(k))
        warm = 1 + 3 * math.exp(-k / s.warmup_steps)
        loss = trend * (1 + 0.015 * warm * float(rng.standard_t(4)))
        since_epoch = k % s.steps_per_epoch
        if k >= s.steps_per_epoch and since_epoch < 30:
            loss += 0.03 * trend * math.exp(-since_epoch / 8)
        grad = c.grad_level * (1 + 2 * math.exp(-k / 300)) * math.exp(rng.normal(0, 0.15 * warm))
        return {
            "train.loss": loss,
            "train.lr": self.lr(k),
            "train.grad_norm": grad,
            "train.tokens_per_s": s.tokens_per_step / step_time,
        }

    def _ckpt_write_s(self, rng: np.random.Generator) -> np.ndarray:
        bandwidth = self._c.ckpt_bandwidth * self._ckpt_speedup
        return self.ckpt_bytes / bandwidth * rng.uniform(0.9, 1.1, self.shape.nodes)

    def _val_loss(self, k: int, rng: np.random.Generator) -> float:
        return float(self.loss_trend(k)) * (1.03 + float(rng.normal(0, 0.003)))
