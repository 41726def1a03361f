"""What each fault does to one step, one hardware reading or the logs: pure edits, no state.

Numbers follow the simulation's model of synchronous data parallelism: every rank leaves the
all-reduce when the last one arrives, so whatever slows one rank's compute, data wait or
collectives shows in everyone's step and communication time.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ._faults import PlacedFault
from ._hardware import GPU_MEM_TOTAL_BYTES, GPU_POWER_LIMIT_W
from ._training import StepMetrics

#: A failing fan: the GPU heats from THERMAL_FROM_C at THERMAL_RATE_C_S to its magnitude.
THERMAL_FROM_C, THERMAL_RATE_C_S = 70.0, 0.1
#: NVML clocks-event reason: hardware thermal slowdown, set once the GPU is this hot.
THROTTLE_HW_THERMAL, THROTTLE_AT_C = 0x40, 85.0
#: A growing allocation: GPU memory climbs from MEM_FROM of total to its magnitude over MEM_RAMP_S.
MEM_FROM, MEM_RAMP_S = 0.70, 120.0
#: A swinging power draw alternates above and below its level every half of this period.
POWER_PERIOD_S = 240.0
#: Xid 48 is the driver's report of an uncorrectable (double-bit) ECC error.
XID_ECC = 48
#: NCCL's default collective timeout: the watchdog of every waiting rank reports after it.
NCCL_TIMEOUT_S = 600.0

OOM_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU {gpu} has a "
    "total capacity of 79.10 GiB of which 1.95 GiB is free."
)
NCCL_LINE = (
    "[rank{rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=4711, OpType=ALLREDUCE, NumelIn=262144000, "
    "NumelOut=262144000, Timeout(ms)=600000) ran for 600027 milliseconds before timing out."
)
IO_LINE = "OSError: [Errno 122] Disk quota exceeded: '/checkpoints/run/step_{step}/model.pt'"
NONFINITE_LINE = "{{'loss': nan, 'grad_norm': nan, 'learning_rate': 0.0003, 'epoch': {epoch}}}"
_XID_TEXT = {
    13: "Graphics Exception: ESR 0x404600=0x80000002",
    31: "Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted",
    XID_ECC: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer",
    79: "GPU has fallen off the bus.",
}


def xid_line(code: int, gpu: int) -> str:
    """The kernel log line the NVIDIA driver writes for an Xid on GPU ``gpu``."""
    text = _XID_TEXT.get(code, "Xid error, see the driver documentation")
    return f"NVRM: Xid (PCI:0000:{0x18 + gpu:02x}:00): {code}, pid=48213, name=python, {text}"


#: The faults that change how long a step's phases take.
TIMING_KINDS = (
    "step_time_regression",
    "straggler",
    "dataloader_bottleneck",
    "sync_latency",
    "checkpoint_slow",
)


def slowed(m: StepMetrics, a: PlacedFault, gpus_per_node: int) -> StepMetrics:
    """The step as a fault that slows one of its phases leaves it."""
    t = m.timings
    ranks = slice(a.node * gpus_per_node, (a.node + 1) * gpus_per_node)
    if a.kind == "step_time_regression":  # every phase of every rank, as slower clocks
        data, compute = t["train.data_time_s"] * a.size, t["train.compute_time_s"] * a.size
        return retimed(m, data=data, compute=compute, ring=_own_ring(m) * a.size)
    if a.kind == "straggler":
        compute = t["train.compute_time_s"].copy()
        compute[a.rank] *= a.size
        return retimed(m, compute=compute)
    if a.kind == "dataloader_bottleneck":
        data = t["train.data_time_s"].copy()
        data[ranks] += a.size * t["train.compute_time_s"][ranks]
        return retimed(m, data=data)
    if a.kind == "sync_latency":
        ring = _own_ring(m)
        ring[ranks] *= a.size
        return retimed(m, ring=ring)
    if not m.ckpt_bytes:  # a slow disk shows when a checkpoint is written
        return m
    writes = m.ckpt_write_s.copy()
    writes[a.node] = m.ckpt_bytes / (a.size * 1e6)
    return retimed(m, ckpt_write_s=writes)


def _own_ring(m: StepMetrics) -> np.ndarray:
    """Each rank's own collective time: its communication time less its wait for the last."""
    t = m.timings
    ready = t["train.compute_time_s"] + t["train.data_time_s"]
    return t["train.comm_time_s"] - (ready.max() - ready)


def retimed(
    m: StepMetrics,
    *,
    data: np.ndarray | None = None,
    compute: np.ndarray | None = None,
    ring: np.ndarray | None = None,
    ckpt_write_s: np.ndarray | None = None,
) -> StepMetrics:
    """The step with some ranks' data wait, compute or own collective time (``ring``) changed,
    or its checkpoint writes: everyone leaves the all-reduce when the last rank arrives."""
    t = m.timings
    data = t["train.data_time_s"] if data is None else data
    compute = t["train.compute_time_s"] if compute is None else compute
    ring = _own_ring(m) if ring is None else ring
    writes = m.ckpt_write_s if ckpt_write_s is None else ckpt_write_s
    ready = compute + data
    train_s = float(ready.max() + ring.max())
    pause, old_pause = m.eval_s + float(writes.max()), m.eval_s + m.ckpt_s
    step_time = t["train.step_time_s"] * (train_s + pause) / (m.train_s + old_pause)
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
        ckpt_write_s=writes,
    )


def hung(m: StepMetrics) -> StepMetrics:
    """A step that never ends: every rank spins in a collective that waits for a lost peer."""
    return dataclasses.replace(
        m,
        busy=np.ones_like(m.busy),
        train_s=math.inf,
        eval_s=0.0,
        ckpt_write_s=np.zeros_like(m.ckpt_write_s),
        ckpt_bytes=0.0,
    )


def ramp(a: PlacedFault, since: float) -> float:
    """Where a heating GPU (°C) or a growing allocation (share) stands ``since`` s in."""
    if a.kind == "gpu_thermal":
        return min(THERMAL_FROM_C + THERMAL_RATE_C_S * since, a.size)
    return MEM_FROM + (a.size - MEM_FROM) * min(since / MEM_RAMP_S, 1.0)


def crossing_s(a: PlacedFault, line: float) -> float:
    """Seconds after its start at which a ramp reaches ``line`` (given that it does)."""
    if a.kind == "gpu_thermal":
        return max(line - THERMAL_FROM_C, 0.0) / THERMAL_RATE_C_S
    return MEM_RAMP_S * max(line - MEM_FROM, 0.0) / (a.size - MEM_FROM)


def edit_gpu(gpu: dict[str, np.ndarray], a: PlacedFault, since: float, jitter: float) -> None:
    """Apply one GPU fault, ``since`` s after it began, to a copy-on-write reading."""
    where = (a.node, a.gpu)

    def column(name: str) -> np.ndarray:
        gpu[name] = col = gpu[name].copy()
        return col

    if a.kind == "gpu_thermal":
        temp = column("gpu.temp_c")
        temp[where] = max(float(temp[where]), ramp(a, since) + jitter)
        if temp[where] >= THROTTLE_AT_C:
            reasons = column("gpu.throttle_reasons")
            reasons[where] = float(int(reasons[where]) | THROTTLE_HW_THERMAL)
    elif a.kind == "gpu_memory_pressure":
        mem = column("gpu.mem_used_bytes")
        mem[where] = max(float(mem[where]), round(ramp(a, since) * GPU_MEM_TOTAL_BYTES))
    elif a.kind == "gpu_underutilized":
        util = column("gpu.util_pct")
        util[where] = min(float(util[where]), max(a.size + 4 * jitter, 0.0))
        column("gpu.power_w")[where] = GPU_POWER_LIMIT_W * (0.2 + 0.7 * util[where] / 100)
    elif a.kind == "gpu_power_anomaly":
        power = column("gpu.power_w")
        swing = 1 + a.size * math.copysign(1.0, math.sin(2 * math.pi * since / POWER_PERIOD_S))
        power[where] = min(float(power[where]) * swing, GPU_POWER_LIMIT_W)
    elif a.kind == "gpu_errors":
        column("gpu.xid_errors")[where] += 1
        if round(a.size) == XID_ECC:
            column("gpu.ecc_errors")[where] += 1


def edit_host(host: dict[str, np.ndarray], a: PlacedFault, since: float, base: float) -> None:
    """Apply one host fault ``since`` s after it began; ``base`` is the fault's first reading
    of what it changes (memory used, disk free), which sets its pace."""
    node = a.node

    def column(name: str) -> np.ndarray:
        host[name] = col = host[name].copy()
        return col

    if a.kind == "host_memory_leak":
        used = column("host.mem_used_bytes")
        grown = float(used[node]) + base * a.size / 100 * since / 3600
        used[node] = min(grown, float(host["host.mem_total_bytes"][node]))
    elif a.kind == "cpu_saturation":  # readings about its level, a quarter of a per cent off
        core = column("host.cpu_core_max_pct")
        core[node] = min(a.size + 0.25 * math.sin(since), 100.0)
    elif a.kind == "disk_full":
        rate = base / (a.size * 3600)
        free = column("host.disk_free_bytes")
        free[node] = max(float(free[node]) - rate * since, 0.0)
        column("host.disk_write_bytes_per_s")[node] += rate
