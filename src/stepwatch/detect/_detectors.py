"""Streaming detectors for one series each: non-finite, threshold, hold-for, robust z, CUSUM."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from stepwatch.detect._base import (
    Detector,
    Direction,
    Floats,
    Verdict,
    check_direction,
    directed,
    ewm_before,
)

MAD_SCALE = 1.4826  # MAD of a normal distribution times this estimates its standard deviation
_OPS = {
    ">": np.greater,
    ">=": np.greater_equal,
    "<": np.less,
    "<=": np.less_equal,
}


class NonFinite(Detector):
    """Flags NaN and +-Inf samples (score 1.0), the one detector that sees them."""

    skips_nonfinite = False

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        bad = ~np.isfinite(value)
        return Verdict(bad.astype(np.float64), bad)


class Threshold(Detector):
    """A value beyond a fixed level; score is the margin past it (positive means beyond)."""

    def __init__(self, level: float, op: str = ">") -> None:
        super().__init__()
        if op not in _OPS:
            raise ValueError(f"op must be one of {tuple(_OPS)}, not {op!r}")
        self.level, self.op = float(level), op

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        margin = value - self.level if self.op.startswith(">") else self.level - value
        return Verdict(margin, _OPS[self.op](value, self.level))


class HoldFor(Detector):
    """A condition (value != 0) counted only once it has held ``for_s`` seconds of data time.

    Like a Prometheus ``for:``; it keeps firing ``keep_firing_for_s`` after the held condition
    last held. Score is how long the current run of true samples has lasted, 0 when false.
    """

    _state_keys = ("since", "last_fired")

    def __init__(self, for_s: float, keep_firing_for_s: float = 0.0) -> None:
        super().__init__()
        if for_s < 0 or keep_firing_for_s < 0:
            raise ValueError("for_s and keep_firing_for_s must be >= 0")
        self.for_s, self.keep_firing_for_s = float(for_s), float(keep_firing_for_s)
        self.since = math.nan
        self.last_fired = -math.inf

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        cond = value != 0
        before = np.concatenate([[not math.isnan(self.since)], cond[:-1]])
        starts = np.where(cond & ~before, ts, -np.inf)
        if cond.size and cond[0] and before[0]:
            starts[0] = self.since
        since = np.maximum.accumulate(starts) if cond.size else starts
        held_s = np.where(cond, ts - since, 0.0)
        held = cond & (held_s >= self.for_s)
        fired = np.maximum.accumulate(np.where(held, ts, self.last_fired)) if cond.size else ts
        anomalous = held | (ts - fired < self.keep_firing_for_s)
        if cond.size:
            self.since = float(since[-1]) if cond[-1] else math.nan
            self.last_fired = float(fired[-1])
        return Verdict(held_s, anomalous)


class RobustZ(Detector):
    """Robust z-score of a value against an EWMA level and EWMA absolute deviation (x 1.4826).

    Two baselines run side by side: a plain one over every sample, and the scoring one, which
    skips the samples the plain one already finds beyond ``z``, so a spike does not inflate the
    baseline that judges the next spike. ``halflife`` and ``warmup`` count samples.
    """

    _state_keys = ("plain", "robust", "count")

    def __init__(
        self,
        z: float = 6.0,
        halflife: float = 100.0,
        warmup: int = 30,
        direction: Direction = "up",
    ) -> None:
        super().__init__()
        check_direction(direction)
        if z <= 0 or halflife <= 0 or warmup < 2:
            raise ValueError("z and halflife must be > 0 and warmup >= 2")
        self.z, self.warmup, self.direction = float(z), int(warmup), direction
        self._log_decay = -math.log(2.0) / halflife
        self.plain = np.zeros((2, 2))
        self.robust = np.zeros((2, 2))
        self.count = 0

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        decay = np.full(value.shape, self._log_decay)
        warm = self.count + np.arange(value.size) >= self.warmup
        everything = np.ones(value.shape)
        z_plain, self.plain = _robust_z(value, everything, decay, self.plain)
        inlier = ~(warm & (np.abs(z_plain) >= self.z))
        z, self.robust = _robust_z(value, inlier.astype(np.float64), decay, self.robust)
        self.count += value.size
        score = np.where(warm, directed(z, self.direction), np.nan)
        return Verdict(score, warm & (score >= self.z))


def _robust_z(x: Floats, weight: Floats, decay: Floats, state: Floats) -> tuple[Floats, Floats]:
    """z of each sample against the level and deviation it sees; new [level sums, dev sums]."""
    level, level_sums = ewm_before(x, weight, decay, state[0])
    diff = x - level
    dev_weight = weight * np.isfinite(level)
    mad, dev_sums = ewm_before(
        np.where(dev_weight > 0, np.abs(diff), 0.0), dev_weight, decay, state[1]
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        z = diff / (MAD_SCALE * mad)
    return np.where(diff == 0, 0.0, z), np.vstack([level_sums, dev_sums])


class Cusum(Detector):
    """Two-sided CUSUM on log(value) for a sustained relative shift of a positive series.

    Working on logs makes ``shift`` relative (0.2 = 20 %), so it suits step times of any scale.
    CUSUM conventions in units of the shift d = log(1 + shift): allowance d/2, decision
    ``threshold`` (default 4 d) and each sample's log-ratio clipped to +-2 d, so an isolated pause
    (x50 for one step) adds at most 1.5 d. Score is the CUSUM statistic in log units. The
    reference is an EWMA of log(value) over ``halflife`` samples; non-positive values are skipped.
    """

    _state_keys: ClassVar[tuple[str, ...]] = ("sums", "stat", "count")

    def __init__(
        self,
        shift: float = 0.2,
        threshold: float | None = None,
        halflife: float = 200.0,
        warmup: int = 30,
        direction: Direction = "up",
    ) -> None:
        super().__init__()
        check_direction(direction)
        if shift <= 0 or halflife <= 0 or warmup < 1:
            raise ValueError("shift and halflife must be > 0 and warmup >= 1")
        self.size = math.log1p(shift)
        self.threshold = 4.0 * self.size if threshold is None else float(threshold)
        self.warmup, self.direction = int(warmup), direction
        self._log_decay = -math.log(2.0) / halflife
        self.sums = np.zeros(2)
        self.stat = np.zeros(2)
        self.count = 0

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        positive = value > 0
        log_value = np.log(np.where(positive, value, 1.0))
        weight = positive.astype(np.float64)
        ref, self.sums = ewm_before(
            log_value, weight, np.full(value.shape, self._log_decay), self.sums
        )
        seen = self.count + np.cumsum(positive) - positive
        live = positive & (seen >= self.warmup)
        ratio = np.clip(np.where(live, log_value - ref, 0.0), -2 * self.size, 2 * self.size)
        up = _cusum(np.where(live, ratio - self.size / 2, 0.0), self.stat[0])
        down = _cusum(np.where(live, -ratio - self.size / 2, 0.0), self.stat[1])
        if value.size:
            self.stat = np.array([up[-1], down[-1]])
        self.count += int(positive.sum())
        score = {"up": up, "down": down, "both": np.maximum(up, down)}[self.direction]
        score = np.where(live, score, np.nan)
        return Verdict(score, live & (score >= self.threshold))


def _cusum(step: Floats, start: float) -> Floats:
    """``g_j = max(0, g_{j-1} + step_j)`` from ``g = start``, as the walk minus its running min."""
    walk = start + np.cumsum(step)
    return walk - np.minimum(np.minimum.accumulate(walk), 0.0) if step.size else walk
