"""Slow-moving detectors: trend slope (leaks, divergence, forecasts) and loss plateaus."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stepwatch.detect._base import (
    Detector,
    Direction,
    Floats,
    Verdict,
    check_direction,
    decayed_cumsum,
    directed,
)

HOUR_S = 3600.0


@dataclass(frozen=True)
class TrendVerdict(Verdict):
    """A trend verdict with the fit behind it: slope, level now and time to the target."""

    slope_per_h: Floats
    level: Floats
    time_to_target_s: Floats


class TrendSlope(Detector):
    """Exponentially weighted linear regression of value on data time.

    Score is the slope relative to the fitted level, in % per hour (``direction`` signed); a
    sample is anomalous when it reaches ``threshold_pct_per_h`` (default: ANOMALIES.md's 5 %/h
    memory leak). With a ``target``, ``time_to_target_s`` says when the fitted line crosses it
    (inf when moving away). Weights halve every ``halflife_s`` seconds of data time (default half
    an hour: an effective span of about an hour for a per-hour rate); nothing is scored before
    ``warmup_s`` (default half a half-life) of data, since a slope from seconds of noise means
    nothing.
    """

    _state_keys = ("sums", "t_first", "t_prev")

    def __init__(
        self,
        halflife_s: float = HOUR_S / 2,
        threshold_pct_per_h: float = 5.0,
        direction: Direction = "up",
        target: float | None = None,
        warmup_s: float | None = None,
    ) -> None:
        super().__init__()
        check_direction(direction)
        if halflife_s <= 0 or threshold_pct_per_h <= 0:
            raise ValueError("halflife_s and threshold_pct_per_h must be > 0")
        self.threshold, self.direction, self.target = threshold_pct_per_h, direction, target
        self.warmup_s = halflife_s / 2 if warmup_s is None else float(warmup_s)
        self._rate = math.log(2.0) / halflife_s
        self.sums = np.zeros(5)  # weights of 1, x, x^2, y, x*y with x in hours since t_prev
        self.t_first = math.nan
        self.t_prev = math.nan

    def _score(self, ts: Floats, value: Floats) -> TrendVerdict:
        if math.isnan(self.t_first) and ts.size:
            self.t_first = self.t_prev = float(ts[0])
        origin = self.t_prev
        gaps = np.diff(np.concatenate([[origin], ts])) if ts.size else ts
        x = (ts - origin) / HOUR_S
        rows = np.vstack([np.ones_like(x), x, x * x, value, x * value])
        sums = decayed_cumsum(rows, -self._rate * gaps, self.sums)
        slope, level = _fit(sums, x)
        warm = ts - self.t_first >= self.warmup_s
        slope = np.where(warm, slope, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = directed(100.0 * slope / np.abs(level), self.direction)
        if ts.size:
            self.sums = _recentred(sums[:, -1], float(x[-1]))
            self.t_prev = float(ts[-1])
        return TrendVerdict(
            score=score,
            anomalous=score >= self.threshold,
            slope_per_h=slope,
            level=level,
            time_to_target_s=self._time_to_target(slope, level),
        )

    def _time_to_target(self, slope: Floats, level: Floats) -> Floats:
        if self.target is None:
            return np.full(slope.shape, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            hours = (self.target - level) / slope
        return np.where(hours >= 0, hours * HOUR_S, np.where(np.isnan(slope), np.nan, np.inf))


def _fit(sums: Floats, x: Floats) -> tuple[Floats, Floats]:
    """Weighted least-squares slope per hour and the fitted value at each sample's own time."""
    w, sx, sxx, sy, sxy = sums
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_x, mean_y = sx / w, sy / w
        var = sxx / w - mean_x * mean_x
        slope = (sxy / w - mean_x * mean_y) / var
    slope = np.where(var > 1e-12 * np.maximum(mean_x * mean_x, 1.0), slope, np.nan)
    return slope, mean_y + slope * (x - mean_x)


def _recentred(sums: Floats, shift: float) -> Floats:
    """The same weighted sums with x measured from ``shift`` hours later (exact algebra)."""
    w, sx, sxx, sy, sxy = sums
    return np.array(
        [w, sx - shift * w, sxx - 2 * shift * sx + shift * shift * w, sy, sxy - shift * sy]
    )


class Plateau(Detector):
    """A falling series (a loss) whose fall all but stops, relative to its own recent fall.

    Progress is the lowest EWMA-smoothed value so far (``halflife`` samples), so a spike and its
    recovery are not progress; its relative fall over the last ``window`` samples is compared
    with the fall over the window before. Score is that ratio; anomalous when
    the earlier fall was significant (>= ``min_fall``) and the ratio is <= ``ratio``. The ordinary
    slow-down of a long run keeps the ratio near 1. Smoothed values count once the EWMA has seen
    two half-lives of samples. State: a ring of 2 x ``window`` values.
    """

    _state_keys = ("sums", "ring", "count")

    def __init__(
        self,
        window: int = 1000,
        halflife: float | None = None,
        ratio: float = 0.1,
        min_fall: float = 0.02,
    ) -> None:
        super().__init__()
        if window < 2 or not 0 < ratio < 1 or min_fall <= 0:
            raise ValueError("window must be >= 2, 0 < ratio < 1 and min_fall > 0")
        self.window, self.ratio, self.min_fall = int(window), float(ratio), float(min_fall)
        halflife = window / 10 if halflife is None else halflife
        self._log_decay = -math.log(2.0) / halflife
        self._warmup = math.ceil(2 * halflife)
        self.sums = np.zeros(2)
        self.count = 0
        self.ring = np.full(2 * self.window, np.nan)

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        ones = np.ones(value.shape)
        both = decayed_cumsum(
            np.vstack([value, ones]), np.full(value.shape, self._log_decay), self.sums
        )
        seen = self.count + np.arange(1, value.size + 1)
        smooth = np.where(seen >= self._warmup, both[0] / both[1], np.nan)
        self.count += value.size
        if value.size:
            self.sums = both[:, -1].copy()
        best = np.fmin.accumulate(np.concatenate([self.ring[-1:], smooth]))[1:]
        history = np.concatenate([self.ring, best])
        now = history[2 * self.window :]
        mid = history[self.window : self.window + value.size]
        old = history[: value.size]
        with np.errstate(divide="ignore", invalid="ignore"):
            earlier = (old - mid) / np.abs(old)
            recent = (mid - now) / np.abs(mid)
            score = np.where(earlier > 0, recent / earlier, np.nan)
        self.ring = history[-2 * self.window :].copy()
        return Verdict(score, (earlier >= self.min_fall) & (score <= self.ratio))
