"""A run's learning-rate schedule as its config states it (``lr_schedule``), so forecasts know
the learning rate of steps not yet taken: annealing lowers the loss, a plain power law in steps
does not see it coming."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SCHEDULE_TYPES", "LrSchedule", "ScheduleError"]

#: The shapes a schedule may have after its warm-up.
SCHEDULE_TYPES = ("cosine", "linear", "wsd", "inv_sqrt", "constant")

_FIELDS = (
    "type",
    "warmup_steps",
    "peak_lr",
    "final_lr",
    "total_steps",
    "decay_start_step",
    "decay_type",
)
#: How a wsd schedule's decay runs from its peak to its final rate.
_DECAYS = ("linear", "cosine")


class ScheduleError(ValueError):
    """An ``lr_schedule`` that cannot be read; the message says which field and why."""


@dataclass(frozen=True, slots=True)
class LrSchedule:
    """Linear warm-up from 0 at step 0 to ``peak_lr`` at ``warmup_steps``, then ``type``
    (steps counted as Hugging Face's schedulers count them: step s trains at the rate after s
    scheduler steps):

    - cosine / linear: from ``peak_lr`` to ``final_lr`` at ``total_steps``;
    - wsd (warm-up, stable, decay): ``peak_lr`` until ``decay_start_step``, then to
      ``final_lr`` at ``total_steps``, linearly or along a half cosine (``decay_type``);
    - inv_sqrt: ``peak_lr · sqrt(warmup_steps / step)`` (a warm-up of at least one step);
    - constant: ``peak_lr``.
    """

    type: str
    peak_lr: float
    total_steps: int
    warmup_steps: int = 0
    final_lr: float = 0.0
    decay_start_step: int | None = None
    decay_type: str = "linear"

    def __post_init__(self) -> None:
        if self.type not in SCHEDULE_TYPES:
            raise ScheduleError(
                f"lr_schedule.type: {self.type!r} is not one of {', '.join(SCHEDULE_TYPES)}"
            )
        for name in ("peak_lr", "final_lr"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ScheduleError(f"lr_schedule.{name}: {value!r} is not a rate of 0 or more")
        if not self.peak_lr > 0:
            raise ScheduleError("lr_schedule.peak_lr: must be above 0")
        if not 0 <= self.warmup_steps < self.total_steps:
            raise ScheduleError(
                f"lr_schedule.warmup_steps: {self.warmup_steps} must lie in "
                f"[0, total_steps={self.total_steps})"
            )
        if self.decay_type not in _DECAYS:
            raise ScheduleError(
                f"lr_schedule.decay_type: {self.decay_type!r} is not one of {', '.join(_DECAYS)}"
            )
        if self.type == "wsd":
            start = self.decay_start_step
            if start is None or not self.warmup_steps <= start <= self.total_steps:
                raise ScheduleError(
                    f"lr_schedule.decay_start_step: {start!r} must lie in [warmup_steps="
                    f"{self.warmup_steps}, total_steps={self.total_steps}] for a wsd schedule"
                )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LrSchedule:
        """The schedule a run's ``lr_schedule`` config states (``type``, ``peak_lr`` and
        ``total_steps`` required: a schedule must say where it ends)."""
        unknown = sorted(set(config) - set(_FIELDS))
        if unknown:
            raise ScheduleError(
                f"lr_schedule: unknown field {unknown[0]!r} (fields: {', '.join(_FIELDS)})"
            )
        for name in ("type", "peak_lr", "total_steps"):
            if name not in config:
                raise ScheduleError(f"lr_schedule.{name}: missing")
        start = config.get("decay_start_step")
        return cls(
            type=str(config["type"]),
            peak_lr=_number(config, "peak_lr"),
            total_steps=_count(config, "total_steps"),
            warmup_steps=_count(config, "warmup_steps", 0),
            final_lr=_number(config, "final_lr", 0.0),
            decay_start_step=None if start is None else _count(config, "decay_start_step"),
            decay_type=str(config.get("decay_type", "linear")),
        )

    def lr(self, steps: np.ndarray) -> np.ndarray:
        """The learning rate at each step (0-based; past ``total_steps``: ``final_lr``, or the
        decayed rate for inv_sqrt and constant)."""
        s = np.asarray(steps, np.float64)
        w, peak, final, total = self.warmup_steps, self.peak_lr, self.final_lr, self.total_steps
        after = self._after_warmup(s, w, peak, final, total)
        if w == 0:
            return after
        return np.where(s < w, peak * s / w, after)

    def _after_warmup(
        self, s: np.ndarray, w: int, peak: float, final: float, total: int
    ) -> np.ndarray:
        span = max(total - w, 1)
        t = np.clip((s - w) / span, 0.0, 1.0)
        if self.type == "cosine":
            return final + (peak - final) * 0.5 * (1.0 + np.cos(np.pi * t))
        if self.type == "linear":
            return peak + (final - peak) * t
        if self.decay_type not in _DECAYS:
            raise ScheduleError(
                f"lr_schedule.decay_type: {self.decay_type!r} is not one of {', '.join(_DECAYS)}"
            )
        if self.type == "wsd":
            start = self.decay_start_step if self.decay_start_step is not None else total
            d = np.clip((s - start) / max(total - start, 1), 0.0, 1.0)
            if self.decay_type == "cosine":
                d = 0.5 * (1.0 - np.cos(np.pi * d))
            return peak + (final - peak) * d
        if self.type == "inv_sqrt":
            return peak * np.sqrt(max(w, 1) / np.maximum(s, max(w, 1)))
        return np.full(s.shape, peak)


def _number(config: Mapping[str, Any], name: str, default: float | None = None) -> float:
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScheduleError(f"lr_schedule.{name}: {value!r} is not a number")
    return float(value)


def _count(config: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = config.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScheduleError(f"lr_schedule.{name}: {value!r} is not a step count")
    return value
