"""Advice on a run's settings, each item with the numbers behind it: the micro-batch within
the GPU memory's headroom, the checkpoint interval by Young/Daly, data-loader workers,
gradient accumulation against communication, and GPUs left idle.

Pure: it reads a ``RunFacts`` (figures measured over bounded reads of the run's data) and
the run's config, and says nothing where the data does not support a change, so a healthy
run gets no advice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_GPU_MTBF_H",
    "Advice",
    "RunFacts",
    "Setting",
    "advise",
    "checkpoint_waste",
    "count_failures",
    "count_restarts",
    "idle_gpu_seconds",
    "young_daly_interval",
]

#: Peak memory share that risks running out: the ``gpu_memory_pressure`` rule's line.
MEMORY_FULL = 0.90
#: Doubling the micro-batch at most doubles the memory used: under this it stays below 90 %.
MEMORY_ROOMY = 0.45
#: A step that waits a tenth of its time for its batch leaves the GPU idle that long.
DATA_WAIT_SHARE = 0.10
#: Host CPU above this has no cores left for more loader workers.
CPU_SATURATED_PCT = 90.0
#: More workers may take the host's CPU up to this, leaving room for the training process.
CPU_TARGET_PCT = 85.0
#: Workers grow at most this much at once: the wait is re-measured at the new count.
WORKER_SCALE_MAX = 2.0
#: Collectives over this share of the step: a third of the GPU time goes to synchronising.
COMM_SHARE = 0.30
#: Young/Daly's waste curve is flat near its optimum: within a factor 2 it costs little.
CKPT_RATIO = 2.0
#: A change of checkpoint interval that saves less than this share of the run's time is noise.
CKPT_MIN_GAIN = 0.01
#: Fleet default per GPU when a run saw no failure: Llama 3's pre-training had 419 unexpected
#: interruptions in 54 days on 16,384 GPUs, one per about 50,700 GPU-hours.
DEFAULT_GPU_MTBF_H = 50_000.0
#: Failure alerts this close together are one failure (a crash raises several at once).
FAILURE_GAP_S = 300.0
#: A GPU whose busiest reading over a bucket stays under this did no work in it.
IDLE_UTIL_PCT = 5.0
#: Idle GPU time above a tenth of the run's GPU time is worth releasing or re-assigning.
IDLE_SHARE = 0.10

#: Config keys read, first found wins: plain configs, then what the Hugging Face callback
#: records (``args.*``, the Trainer's arguments) and the Lightning one (``hparams.*``,
#: ``trainer.*``).
BATCH_KEYS = (
    "batch_size",
    "micro_batch_size",
    "args.per_device_train_batch_size",
    "hparams.batch_size",
)
ACCUMULATION_KEYS = (
    "gradient_accumulation_steps",
    "accumulate_grad_batches",
    "args.gradient_accumulation_steps",
    "trainer.accumulate_grad_batches",
)
WORKER_KEYS = (
    "num_workers",
    "dataloader_num_workers",
    "args.dataloader_num_workers",
    "hparams.num_workers",
)
CHECKPOINT_KEYS = ("save_steps", "args.save_steps")


@dataclass(frozen=True, slots=True)
class Advice:
    """One piece of advice: ``kind`` is stable (for clients), ``measurements`` the named
    numbers behind it (units in their names), ``change`` either ``{"setting", "from", "to",
    "scale"}`` (with ``"and"``: a second setting moved with it) or ``{"action": ...}``."""

    kind: str
    title: str
    why: str
    measurements: dict[str, float]
    change: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, "why": self.why,
                "measurements": dict(self.measurements), "change": dict(self.change)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What advice is drawn from, measured over bounded reads of a run's data; None where not
    measured. Times are seconds; ``gpu_mem_peak`` is the fullest GPU's peak share (0-1)."""

    wall_s: float
    gpus: int
    config: Mapping[str, Any] = field(default_factory=dict)
    step_s: float | None = None  # the median step of the recent steps
    data_wait_s: float | None = None  # their median wait for the batch
    comm_s: float | None = None  # their median time in collectives
    host_cpu_pct: float | None = None
    gpu_mem_peak: float | None = None
    oom_alerts: int = 0
    network_alerts: int = 0
    failures: int = 0
    ckpt_write_s: float | None = None  # the median checkpoint write
    ckpt_interval_s: float | None = None  # the median time between checkpoints seen
    startup_idle_gpu_s: float = 0.0
    training_idle_gpu_s: float = 0.0
    idle_gpus_now: int = 0


@dataclass(frozen=True, slots=True)
class Setting:
    """A setting as the config states it: the dotted key it was found under (the first
    candidate when none was) and its value (None when not stated)."""

    key: str
    value: int | None

    @classmethod
    def read(cls, config: Mapping[str, Any], keys: Sequence[str], least: int = 1) -> Setting:
        """The first of ``keys`` whose value is a whole number >= ``least``."""
        for key in keys:
            value = _lookup(config, key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                if math.isfinite(value) and value == int(value) and value >= least:
                    return cls(key, int(value))
        return cls(keys[0], None)

    def to(self, new: int | None, scale: float) -> dict[str, Any]:
        """The change of this setting to ``new`` (None when its value is unknown)."""
        return {"setting": self.key, "from": self.value, "to": new, "scale": scale}


def _lookup(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def young_daly_interval(write_s: float, mtbf_s: float) -> float:
    """The checkpoint interval that loses least, to first order: sqrt(2 · write · MTBF)."""
    return math.sqrt(2.0 * write_s * mtbf_s)


def checkpoint_waste(interval_s: float, write_s: float, mtbf_s: float) -> float:
    """The expected share of time lost: writing checkpoints (write / interval) and redoing,
    after each failure, half an interval of work on average (interval / 2 / MTBF)."""
    return write_s / interval_s + interval_s / (2.0 * mtbf_s)


def count_restarts(steps: np.ndarray) -> int:
    """How many times the step went back (a restart from a checkpoint), in time order;
    negative steps (none logged) are skipped."""
    s = np.asarray(steps, np.int64)
    s = s[s >= 0]
    return int((np.diff(s) < 0).sum())


def count_failures(restarts: int, alert_times: Sequence[float]) -> int:
    """Failures seen: the larger of the restarts and the bursts of failure alerts (alerts
    within ``FAILURE_GAP_S`` of each other are one), since one failure often shows as both."""
    times = np.sort(np.asarray(alert_times, np.float64))
    bursts = int(len(times) > 0) + int((np.diff(times) > FAILURE_GAP_S).sum())
    return max(restarts, bursts)


def idle_gpu_seconds(
    buckets: Sequence[tuple[np.ndarray, np.ndarray]], width_s: float, first_step_ts: float | None
) -> tuple[float, float, int]:
    """GPU-seconds idle before the first step and after it, and how many GPUs are idle in
    their latest bucket, from each GPU's buckets (start times, busiest reading; empty ones
    left out): a bucket whose busiest reading is under ``IDLE_UTIL_PCT`` is idle until the
    next, for at most the GPU's usual gap between buckets (``width_s`` with one bucket), so
    readings sparser than the buckets count in full and a GPU that went silent does not.
    Before any step, all of it is start-up."""
    before = after = 0.0
    now = 0
    for ts, busiest in buckets:
        t = np.asarray(ts, np.float64)
        gaps = np.diff(t)
        usual = float(np.median(gaps)) if len(gaps) else width_s
        spans = np.minimum(np.append(gaps, usual), usual)
        idle = np.asarray(busiest, np.float64) < IDLE_UTIL_PCT
        early = t < (np.inf if first_step_ts is None else first_step_ts)
        before += float(spans[idle & early].sum())
        after += float(spans[idle & ~early].sum())
        now += int(len(idle) > 0 and bool(idle[-1]))
    return before, after, now


def advise(facts: RunFacts) -> list[Advice]:
    """The advice the run's data supports, in a fixed order; empty for a healthy run."""
    rules: tuple[Callable[[RunFacts], Advice | None], ...] = (
        _memory, _checkpoints, _data_loading, _communication, _idle_gpus,
    )  # fmt: skip
    return [item for rule in rules if (item := rule(facts)) is not None]


def _pct(share: float) -> float:
    return 100.0 * share


def _memory(f: RunFacts) -> Advice | None:
    """Near full: halve the micro-batch, double accumulation (the effective batch is kept).
    Roomy: the reverse, when an even accumulation leaves something to trade."""
    batch = Setting.read(f.config, BATCH_KEYS)
    accum = Setting.read(f.config, ACCUMULATION_KEYS)
    steps = accum.value or 1  # unstated: the frameworks' default
    seen = {"gpu_mem_peak_pct": _pct(f.gpu_mem_peak or 0.0), "oom_alert_count": f.oom_alerts}
    if f.oom_alerts or (f.gpu_mem_peak is not None and f.gpu_mem_peak >= MEMORY_FULL):
        if batch.value == 1:
            return Advice(
                "memory_pressure", "GPU memory is full at a micro-batch of 1",
                f"Peak use reached {seen['gpu_mem_peak_pct']:.0f} % of a GPU's memory with "
                f"{f.oom_alerts} memory alert(s), and the micro-batch cannot be halved.",
                seen, {"action": "enable activation checkpointing or shard the model "
                                 "(FSDP/ZeRO), or use 8-bit optimizer states"},
            )  # fmt: skip
        half = None if batch.value is None else batch.value // 2
        change = batch.to(half, 0.5) | {"and": Setting(accum.key, steps).to(steps * 2, 2.0)}
        return Advice(
            "memory_pressure", "Halve the micro-batch and double gradient accumulation",
            f"Peak use reached {seen['gpu_mem_peak_pct']:.0f} % of a GPU's memory (the line is "
            f"{_pct(MEMORY_FULL):.0f} %) with {f.oom_alerts} memory alert(s); half the "
            "micro-batch over twice the accumulation steps keeps the effective batch.",
            seen, change,
        )  # fmt: skip
    roomy = f.gpu_mem_peak is not None and f.gpu_mem_peak < MEMORY_ROOMY
    if roomy and steps >= 2 and steps % 2 == 0:
        double = None if batch.value is None else batch.value * 2
        change = batch.to(double, 2.0) | {"and": accum.to(steps // 2, 0.5)}
        return Advice(
            "memory_headroom", "Double the micro-batch and halve gradient accumulation",
            f"Peak use is {seen['gpu_mem_peak_pct']:.0f} % of a GPU's memory: twice the "
            "micro-batch stays under the pressure line, and half the accumulation steps keep "
            "the effective batch with fewer, fuller kernels.",
            seen, change,
        )  # fmt: skip
    return None


def _checkpoints(f: RunFacts) -> Advice | None:
    """Young/Daly's interval from the write cost and the failures seen (or the fleet's)."""
    save = Setting.read(f.config, CHECKPOINT_KEYS)
    if _lookup(f.config, "args.save_strategy") not in (None, "steps"):
        save = Setting(save.key, None)  # Hugging Face saves by epoch, or not at all
    now = f.ckpt_interval_s
    if now is None and save.value is not None and f.step_s:
        now = save.value * f.step_s
    if not f.ckpt_write_s or f.ckpt_write_s <= 0 or not now or now <= 0 or f.wall_s <= 0:
        return None
    gpu_h = max(f.gpus, 1) * f.wall_s / 3600.0
    if f.failures:
        mtbf_s = f.wall_s / f.failures
        basis = f"{f.failures} failure(s) in this run's {gpu_h:.0f} GPU-hours"
    else:
        mtbf_s = DEFAULT_GPU_MTBF_H * 3600.0 / max(f.gpus, 1)
        basis = (
            f"no failure seen in this run, so the fleet default of one per "
            f"{DEFAULT_GPU_MTBF_H:,.0f} GPU-hours over its {max(f.gpus, 1)} GPU(s)"
        )
    best = young_daly_interval(f.ckpt_write_s, mtbf_s)
    waste_now = checkpoint_waste(now, f.ckpt_write_s, mtbf_s)
    waste_best = checkpoint_waste(best, f.ckpt_write_s, mtbf_s)
    if max(now / best, best / now) < CKPT_RATIO or waste_now - waste_best < CKPT_MIN_GAIN:
        return None
    seen = {
        "ckpt_write_s": f.ckpt_write_s, "interval_now_s": now, "interval_advised_s": best,
        "mtbf_h": mtbf_s / 3600.0, "failure_count": f.failures, "gpu_hours": gpu_h,
        "lost_per_failure_now_s": now / 2.0, "lost_per_failure_advised_s": best / 2.0,
        "waste_now_pct": _pct(waste_now), "waste_advised_pct": _pct(waste_best),
    }  # fmt: skip
    if save.value is not None and f.step_s:
        steps = max(1, round(best / f.step_s))
        change = save.to(steps, steps / save.value)
    else:
        change = Setting("checkpoint_interval_s", round(now)).to(round(best), best / now)
    more = "less" if now < best else "more"
    every = f"{best / 60:.0f} min" if best < 7200 else f"{best / 3600:.0f} h"
    return Advice(
        "checkpoint_interval", f"Checkpoint {more} often: every {every}",
        f"A checkpoint takes {f.ckpt_write_s:.1f} s to write and the run fails about every "
        f"{mtbf_s / 3600:.1f} h ({basis}); Young/Daly's sqrt(2 x write x MTBF) is "
        f"{best:.0f} s against {now:.0f} s now, losing {_pct(waste_best):.2f} % of the time "
        f"instead of {_pct(waste_now):.2f} %.",
        seen, change,
    )  # fmt: skip


def _data_loading(f: RunFacts) -> Advice | None:
    """Waiting for data with CPU to spare: more workers; with the CPU saturated: move the
    preprocessing off the host."""
    if not f.step_s or f.data_wait_s is None or f.data_wait_s / f.step_s <= DATA_WAIT_SHARE:
        return None
    share = min(f.data_wait_s / f.step_s, 1.0)
    seen = {"step_s": f.step_s, "data_wait_s": f.data_wait_s, "data_wait_pct": _pct(share)}
    if f.host_cpu_pct is not None:
        seen["host_cpu_pct"] = f.host_cpu_pct
    if f.host_cpu_pct is not None and f.host_cpu_pct >= CPU_SATURATED_PCT:
        return Advice(
            "data_preprocessing", "Move data preprocessing off the training host",
            f"Steps wait {_pct(share):.0f} % of their time for data while the host's CPU is at "
            f"{f.host_cpu_pct:.0f} %: more loader workers would have no cores to run on.",
            seen, {"action": "decode, tokenize and augment ahead of time or in a separate "
                             "data service, and read the prepared shards"},
        )  # fmt: skip
    needed = 1.0 / max(1.0 - share, 0.01)  # workers to load a batch per compute time
    room = CPU_TARGET_PCT / max(f.host_cpu_pct, 1.0) if f.host_cpu_pct is not None else needed
    scale = max(min(needed, room, WORKER_SCALE_MAX), 1.0)
    workers = Setting.read(f.config, WORKER_KEYS, least=0)
    new = None
    if workers.value is not None:
        new = max(workers.value + 1, math.ceil(max(workers.value, 1) * scale))
    cpu = "unmeasured" if f.host_cpu_pct is None else f"at {f.host_cpu_pct:.0f} %"
    return Advice(
        "dataloader_workers", "Add data-loader workers",
        f"Steps wait {_pct(share):.0f} % of their time for their batch (over "
        f"{_pct(DATA_WAIT_SHARE):.0f} %) and the host's CPU is {cpu}; loading a batch per "
        f"compute time takes {needed:.2f}x the workers.",
        seen, workers.to(new, scale),
    )  # fmt: skip


def _communication(f: RunFacts) -> Advice | None:
    """Collectives take a large share of the step: sync less often, or, with network alerts,
    look at the network first."""
    if not f.step_s or f.comm_s is None or f.comm_s / f.step_s <= COMM_SHARE:
        return None
    share = min(f.comm_s / f.step_s, 1.0)
    seen = {"step_s": f.step_s, "comm_s": f.comm_s, "comm_pct": _pct(share),
            "network_alert_count": f.network_alerts}  # fmt: skip
    if f.network_alerts:
        return Advice(
            "network", "Check the network between the nodes",
            f"Collectives take {_pct(share):.0f} % of the step and the run raised "
            f"{f.network_alerts} network alert(s): a slow or failing link, not the settings.",
            seen, {"action": "check latency and bandwidth between nodes, the firewall on the "
                             "rendezvous/NCCL ports, and NVLink/P2P"},
        )  # fmt: skip
    accum = Setting.read(f.config, ACCUMULATION_KEYS)
    steps = accum.value or 1
    after = f.comm_s / (2.0 * (f.step_s - f.comm_s) + f.comm_s)
    seen["comm_pct_advised"] = _pct(after)
    return Advice(
        "communication", "Double gradient accumulation to synchronise less often",
        f"Collectives take {_pct(share):.0f} % of the step (over {_pct(COMM_SHARE):.0f} %); "
        f"twice the micro-batches per sync brings that to {_pct(after):.0f} %. The effective "
        "batch doubles, so the learning rate may need retuning.",
        seen, Setting(accum.key, steps).to(steps * 2, 2.0),
    )  # fmt: skip


def _idle_gpus(f: RunFacts) -> Advice | None:
    """GPUs idle for a tenth of the run's GPU time or more: release or re-assign them."""
    gpu_s = max(f.gpus, 1) * f.wall_s
    idle = f.startup_idle_gpu_s + f.training_idle_gpu_s
    if gpu_s <= 0 or idle / gpu_s < IDLE_SHARE:
        return None
    seen = {
        "idle_gpu_hours": idle / 3600.0, "startup_idle_gpu_hours": f.startup_idle_gpu_s / 3600.0,
        "training_idle_gpu_hours": f.training_idle_gpu_s / 3600.0,
        "gpu_hours": gpu_s / 3600.0, "idle_pct": _pct(idle / gpu_s),
        "idle_gpus_now_count": f.idle_gpus_now,
        "saved_gpu_hours_per_day": 24.0 * (f.idle_gpus_now or max(f.gpus, 1) * idle / gpu_s),
    }  # fmt: skip
    if f.idle_gpus_now:
        action = f"release the {f.idle_gpus_now} GPU(s) idle now, or give them other work"
    elif f.startup_idle_gpu_s >= f.training_idle_gpu_s:
        action = "prepare data and load the model before the GPUs are allocated"
    else:
        action = "run long evaluations and data preparation on fewer GPUs, or overlap them"
    return Advice(
        "idle_gpus", f"{seen['idle_gpu_hours']:.1f} GPU-hours idle so far",
        f"GPUs did no work for {seen['idle_pct']:.0f} % of the run's GPU time "
        f"({seen['startup_idle_gpu_hours']:.1f} GPU-hours before the first step, "
        f"{seen['training_idle_gpu_hours']:.1f} after); releasing or re-assigning them would "
        f"save about {seen['saved_gpu_hours_per_day']:.0f} GPU-hours a day.",
        seen, {"action": action},
    )  # fmt: skip
