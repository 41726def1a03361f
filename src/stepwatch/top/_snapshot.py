"""What one frame of `stepwatch top` shows, as plain data: one module fetches it, one draws it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["AlertRow", "Forecast", "GpuRow", "Snapshot", "StepTimes"]

NAN = math.nan


@dataclass(frozen=True, slots=True)
class GpuRow:
    """The newest readings of one GPU; NaN where the device did not report a field."""

    node: str
    gpu: str
    util_pct: float = NAN
    mem_used_bytes: float = NAN
    mem_total_bytes: float = NAN
    temp_c: float = NAN
    power_w: float = NAN
    power_limit_w: float = NAN


@dataclass(frozen=True, slots=True)
class StepTimes:
    """Step time over the newest window, across ranks: quantiles, and the median of each phase."""

    p50_s: float | None = None
    p99_s: float | None = None
    data_s: float | None = None
    compute_s: float | None = None
    comm_s: float | None = None


@dataclass(frozen=True, slots=True)
class AlertRow:
    """One open alert: what fired, how bad, what it says, about which entity, since when."""

    name: str
    severity: str = ""
    summary: str = ""
    since: float | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Forecast:
    """When the run will end and where its loss will land, as the runs list says: the ETA
    (the forecast's, pauses to come included, or the naive one without a forecast) and the
    forecast's p10-p90 of it and of the final loss; None where unknown."""

    eta_s: float | None = None
    eta_s_p10: float | None = None
    eta_s_p90: float | None = None
    final_loss_p10: float | None = None
    final_loss_p50: float | None = None
    final_loss_p90: float | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A run as the collector knew it at ``taken_at``; None where it has no such data yet.

    ``alerts`` is None when the collector offers no alerts at all (as opposed to none open).
    """

    run_id: str
    name: str
    status: str
    taken_at: float
    planned_steps: int | None = None
    step: int | None = None
    last_ts: float | None = None
    steps_per_s: float | None = None
    loss: float | None = None
    lr: float | None = None
    tokens_per_s: float | None = None
    loss_recent: tuple[float, ...] = ()
    gpus: tuple[GpuRow, ...] = ()
    step_times: StepTimes = StepTimes()
    alerts: tuple[AlertRow, ...] | None = None
    forecast: Forecast = Forecast()

    @property
    def progress(self) -> float | None:
        """Fraction of the planned steps done (steps count from 0)."""
        if not self.planned_steps or self.step is None:
            return None
        return min(1.0, (self.step + 1) / self.planned_steps)
