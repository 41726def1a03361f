"""One simulated GPU: each reading is a function of the fake's clock, so scripts replay exactly."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

__all__ = ["GIB", "FakeGpu", "ManualClock"]

GIB = 1 << 30


@dataclass
class FakeGpu:
    """What one fake GPU reports at ``t`` seconds since the fake started; every field scriptable.

    Ramps start at t = 0 and stop at their ceiling (``memory_total_bytes``, ``temp_max_c``);
    ``xids`` lists ``(t, code)`` pairs, ``ecc_errors_at_s`` the times of uncorrected ECC
    errors, ``errors`` maps an NVML function name to the NVML error code it raises.
    """

    name: str = "Fake NVML GPU"
    memory_total_bytes: int = 80 * GIB
    util_pct: float = 90.0
    util_noise_pct: float = 5.0
    mem_start_bytes: int = 20 * GIB
    mem_ramp_bytes_per_s: float = 0.0
    temp_start_c: float = 45.0
    temp_ramp_c_per_s: float = 0.0
    temp_max_c: float = 95.0
    throttle_temp_c: float = 85.0
    power_base_w: float = 450.0
    power_swing_w: float = 0.0
    power_period_s: float = 60.0
    power_limit_w: float = 700.0
    sm_clock_mhz: int = 1980
    sm_clock_throttled_mhz: int = 1410
    pcie_rx_kb_per_s: int = 2_000_000
    pcie_tx_kb_per_s: int = 1_000_000
    ecc: bool = True
    ecc_errors_at_s: list[float] = field(default_factory=list)
    nvlink: bool = True
    nvlink_links: int = 18
    nvlink_rx_bytes_per_s: float = 50e9
    nvlink_tx_bytes_per_s: float = 40e9
    xids: list[tuple[float, int]] = field(default_factory=list)
    lost_at_s: float | None = None
    errors: dict[str, int] = field(default_factory=dict)
    #: Processes computing on it.
    pids: list[int] = field(default_factory=list)
    #: Its UUID; empty: ``GPU-fa4e0000-0000-4000-8000-<index as 12 hex digits>``.
    uuid: str = ""

    def __post_init__(self) -> None:
        if self.power_period_s <= 0:
            raise ValueError("power_period_s must be > 0")
        if self.nvlink_links < 1:
            raise ValueError("nvlink_links must be >= 1")
        if not 0 <= self.mem_start_bytes <= self.memory_total_bytes:
            raise ValueError("mem_start_bytes must be between 0 and memory_total_bytes")

    def lost(self, t: float) -> bool:
        return self.lost_at_s is not None and t >= self.lost_at_s

    def util(self, index: int, t: float) -> int:
        """Level plus noise that depends only on (GPU, t): the same instant reads the same."""
        noise = random.Random(f"{index}:{t:.6f}").uniform(-1.0, 1.0) * self.util_noise_pct
        return round(min(100.0, max(0.0, self.util_pct + noise)))

    def mem_used(self, t: float) -> int:
        return min(
            self.memory_total_bytes, int(self.mem_start_bytes + self.mem_ramp_bytes_per_s * t)
        )

    def temp(self, t: float) -> int:
        return round(min(self.temp_max_c, self.temp_start_c + self.temp_ramp_c_per_s * t))

    def thermal_throttled(self, t: float) -> bool:
        return self.temp(t) >= self.throttle_temp_c

    def sm_clock(self, t: float) -> int:
        return self.sm_clock_throttled_mhz if self.thermal_throttled(t) else self.sm_clock_mhz

    def power_mw(self, t: float) -> int:
        phase = 2 * math.pi * t / self.power_period_s
        return round(1000 * (self.power_base_w + self.power_swing_w * math.sin(phase)))

    def ecc_count(self, t: float) -> int:
        return sum(1 for at in self.ecc_errors_at_s if at <= t)

    def nvlink_kib(self, t: float, rate_bytes_per_s: float, links: int) -> int:
        """Cumulative KiB over ``links`` of the GPU's links, as NVML's throughput counters count."""
        return int(rate_bytes_per_s * links / self.nvlink_links * t) // 1024


@dataclass
class ManualClock:
    """A clock tests move by hand: pass it as the fake's clock and the source's node clock."""

    t: float = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t
