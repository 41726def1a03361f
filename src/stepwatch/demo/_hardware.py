"""Simulated NVML and psutil readings for every GPU and host, vectorised over the whole cluster.

A reading is a pure function of (seed, sample index, what the training is
doing, the previous reading), so the demo stays cheap on a small machine and
a fault can later be injected by editing inputs or outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._shape import GIB, TrainingShape
from ._training import STREAM_CONSTANTS, STREAM_HARDWARE, Activity, Phase, rng_for

GPU_MEM_TOTAL_BYTES = 80 * GIB
GPU_POWER_LIMIT_W = 700.0
HOST_MEM_TOTAL_BYTES = 2048 * GIB
HOST_DISK_BYTES = 30e12
#: Seconds for a GPU's temperature to close 63% of the gap to its steady state.
THERMAL_TAU_S = 20.0
#: NVML clocks-event reasons the demo can show: GPU idle, software power cap.
THROTTLE_IDLE = 0x1
THROTTLE_SW_POWER_CAP = 0x4

# Per-phase (mean, sd) of host CPU load and busiest-core load, in percent.
_CPU = {Phase.TRAIN: (30.0, 4.0), Phase.EVAL: (18.0, 3.0), Phase.CHECKPOINT: (45.0, 5.0)}
_CORE = {Phase.TRAIN: (72.0, 9.0), Phase.EVAL: (55.0, 9.0), Phase.CHECKPOINT: (90.0, 3.0)}
# Share of the all-reduce traffic still on the network in each phase.
_NET = {Phase.TRAIN: 1.0, Phase.EVAL: 0.08, Phase.CHECKPOINT: 0.03}


def _steady_temp(power_w: np.ndarray | float) -> np.ndarray | float:
    """Where a GPU's temperature settles at a given power draw (air-cooled, ~68 C near 600 W)."""
    return 30 + 0.065 * power_w


@dataclass(frozen=True, slots=True)
class HardwareSample:
    """One reading of the cluster: GPU metrics shaped (nodes, gpus), host metrics (nodes,)."""

    gpu: dict[str, np.ndarray]
    host: dict[str, np.ndarray]


@dataclass(frozen=True, slots=True)
class _HardwareConstants:
    """Per-GPU and per-host constants: each device differs a little, and stays itself."""

    mem_frac: np.ndarray  # (nodes, gpus)
    temp_offset: np.ndarray  # (nodes, gpus) degrees C
    host_mem_frac: np.ndarray  # (nodes,)
    net_bytes_per_s: np.ndarray  # (nodes,) during training
    disk_free: np.ndarray  # (nodes,) at the start

    @classmethod
    def draw(cls, shape: TrainingShape) -> _HardwareConstants:
        rng = rng_for(shape.seed, STREAM_CONSTANTS, 1)
        grid = (shape.nodes, shape.gpus_per_node)
        return cls(
            mem_frac=float(rng.uniform(0.6, 0.72)) + rng.normal(0, 0.01, grid),
            temp_offset=np.clip(rng.normal(0, 2.5, grid), -5, 5),
            host_mem_frac=rng.uniform(0.25, 0.45, shape.nodes),
            net_bytes_per_s=float(rng.uniform(5e9, 20e9)) * rng.uniform(0.95, 1.05, shape.nodes),
            disk_free=rng.uniform(0.3, 0.7, shape.nodes) * HOST_DISK_BYTES,
        )


class HardwareSim:
    """Hardware readings of one simulated cluster: ``sample(i, ...)`` is pure in its inputs."""

    def __init__(self, shape: TrainingShape) -> None:
        self.shape = shape
        self._c = _HardwareConstants.draw(shape)
        self._idle_temp = _steady_temp(0.2 * GPU_POWER_LIMIT_W) + self._c.temp_offset

    def sample(
        self,
        i: int,
        activity: Activity,
        prev: HardwareSample | None = None,
        dt: float = 1.0,
    ) -> HardwareSample:
        """Reading number ``i``, ``dt`` seconds after ``prev`` (temperatures lag behind power).

        Without ``prev`` the GPUs start from their idle temperature.
        """
        rng = rng_for(self.shape.seed, STREAM_HARDWARE, i)
        return HardwareSample(
            gpu=self._gpu(rng, activity, prev, dt),
            host=self._host(rng, activity),
        )

    def _gpu(
        self,
        rng: np.random.Generator,
        activity: Activity,
        prev: HardwareSample | None,
        dt: float,
    ) -> dict[str, np.ndarray]:
        grid = self._c.mem_frac.shape
        util = self._util(rng, activity).reshape(grid)
        power = GPU_POWER_LIMIT_W * (0.2 + 0.7 * util / 100) * (1 + rng.normal(0, 0.02, grid))
        power = np.minimum(power, GPU_POWER_LIMIT_W)
        steady = _steady_temp(power) + self._c.temp_offset
        last = self._idle_temp if prev is None else prev.gpu["gpu.temp_c"]
        temp = last + (steady - last) * (1 - math.exp(-dt / THERMAL_TAU_S))
        throttle = np.where(util < 5, THROTTLE_IDLE, 0)
        throttle |= np.where(power > 0.97 * GPU_POWER_LIMIT_W, THROTTLE_SW_POWER_CAP, 0)
        mem = (self._c.mem_frac + rng.normal(0, 0.003, grid)) * GPU_MEM_TOTAL_BYTES
        return {
            "gpu.util_pct": util,
            "gpu.mem_used_bytes": np.round(mem),
            "gpu.mem_total_bytes": np.full(grid, float(GPU_MEM_TOTAL_BYTES)),
            "gpu.temp_c": temp + rng.normal(0, 0.3, grid),
            "gpu.power_w": power,
            "gpu.power_limit_w": np.full(grid, GPU_POWER_LIMIT_W),
            "gpu.throttle_reasons": throttle.astype(np.float64),
            "gpu.xid_errors": np.zeros(grid),
            "gpu.ecc_errors": np.zeros(grid),
        }

    def _util(self, rng: np.random.Generator, activity: Activity) -> np.ndarray:
        """Utilisation tracks each GPU's compute share; evaluation and checkpoints idle it."""
        n = activity.busy.shape[0]
        if activity.phase is Phase.CHECKPOINT:
            return np.clip(rng.normal(2, 1, n), 0, 100)
        util = 115 * activity.busy + rng.normal(0, 2.5, n)
        if activity.phase is Phase.EVAL:
            util = 0.3 * util
        return np.clip(util, 0, 100)

    def _host(self, rng: np.random.Generator, activity: Activity) -> dict[str, np.ndarray]:
        c, n = self._c, self.shape.nodes
        cpu_mean, cpu_sd = _CPU[activity.phase]
        core_mean, core_sd = _CORE[activity.phase]
        rx = c.net_bytes_per_s * _NET[activity.phase] * (1 + rng.normal(0, 0.05, n))
        used = (c.host_mem_frac + rng.normal(0, 0.002, n)) * HOST_MEM_TOTAL_BYTES
        return {
            "host.cpu_pct": np.clip(rng.normal(cpu_mean, cpu_sd, n), 0, 100),
            "host.cpu_core_max_pct": np.clip(rng.normal(core_mean, core_sd, n), 0, 96),
            "host.mem_used_bytes": np.round(used),
            "host.mem_total_bytes": np.full(n, float(HOST_MEM_TOTAL_BYTES)),
            "host.net_rx_bytes_per_s": rx,
            "host.net_tx_bytes_per_s": rx * (1 + rng.normal(0, 0.02, n)),
            "host.disk_write_bytes_per_s": np.abs(rng.normal(5e6, 1e6, n))
            + activity.disk_write_bytes_per_s,
            "host.disk_free_bytes": c.disk_free - activity.ckpt_written_bytes,
        }
