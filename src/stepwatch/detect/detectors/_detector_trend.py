"""Slow-moving detectors: trend slope (leaks, divergence, forecasts) and loss plateaus."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._base import (
    BaselineVerdict,
    Bools,
    Detector,
    Direction,
    Floats,
    Verdict,
    Warmup,
    check_direction,
    decayed_cumsum,
    directed,
)
from ._detectors import MAD_SCALE
from ._trend_peaks import peaks

HOUR_S = 3600.0
_PEAKS_SEEN = 5  # peaks taken before one is judged far off the line
_MIN_SEEN = 10  # samples counted before any is judged an outlier
_FLAT = 1e-9  # a relative fall this small is none, even where a noise-free fit has no error


@dataclass(frozen=True)
class TrendVerdict(Verdict):
    """A trend verdict with the fit behind it: slope, level now, time to the target and the
    data time at which the line reaches it (``predicted_ts``: what a forecast alert tells)."""

    slope_per_h: Floats
    level: Floats
    time_to_target_s: Floats
    predicted_ts: Floats

    @property
    def baseline(self) -> Floats:
        """The fitted level: what the trend is measured against."""
        return self.level


class TrendSlope(Detector):
    """Exponentially weighted linear regression of value on data time.

    Score is the slope relative to the fitted level, in % per hour (``direction`` signed); a
    sample is anomalous when it reaches ``threshold_pct_per_h`` (default: a 5 %/h memory leak).
    With a ``target``, ``time_to_target_s`` says when the fitted line crosses it (inf when
    moving away); with a ``horizon_s`` too, a sample is anomalous instead when that crossing is
    due within the horizon (a disk predicted to fill). Weights halve every ``halflife_s``
    seconds of data time (default half an hour: an effective span of about an hour for a
    per-hour rate); nothing is scored before ``warmup_s`` (default half a half-life) of data,
    since a slope from seconds of noise means nothing.

    A gap in the data longer than the warm-up keeps what was learnt before it (decayed by the
    gap's length, as any older data) but warms up again after it, visibly (``warming_up``):
    the first few samples after a long gap would otherwise tilt the line on their own noise.
    Shorter gaps, lost samples and a changed sampling interval only change how many samples
    the fit has.

    With ``peak_s`` the line goes through the highest value (lowest, direction down) of each
    ``peak_s`` of data time instead of every sample (see ``_trend_peaks``): a forecast of what
    breaks at the peak, which dips shorter than that do not tilt. A lone peak far over the line
    is left out, and so are peaks far under it for up to ``pause_s`` (see ``_peak_fit``). A
    sample is judged by the line through the peaks known by then, at its own time. With
    ``level_jumps``, a peak that jumps far over the last (a load that changed at once, as a
    starved job's recovering) starts the line again at its level: a jump is no climb.
    ``predicted_ts`` is the data time at which the line reaches the target.
    """

    _state_keys = ("sums", "t_prev", "t_warm", "stretch", "fit", "guard")

    def __init__(
        self,
        halflife_s: float = HOUR_S / 2,
        threshold_pct_per_h: float = 5.0,
        direction: Direction = "up",
        target: float | None = None,
        warmup_s: float | None = None,
        horizon_s: float | None = None,
        peak_s: float | None = None,
        pause_s: float = 0.0,
        level_jumps: bool = False,
    ) -> None:
        super().__init__()
        check_direction(direction)
        if halflife_s <= 0 or threshold_pct_per_h <= 0:
            raise ValueError("halflife_s and threshold_pct_per_h must be > 0")
        if horizon_s is not None and (target is None or horizon_s <= 0):
            raise ValueError("horizon_s needs a target and must be > 0")
        if peak_s is not None and (peak_s <= 0 or direction == "both"):
            raise ValueError("peak_s must be > 0, with direction up or down")
        if pause_s < 0 or (pause_s > 0 and peak_s is None):
            raise ValueError("pause_s must be >= 0, and needs peak_s")
        if level_jumps and peak_s is None:
            raise ValueError("level_jumps needs peak_s")
        self.horizon_s, self.peak_s, self.pause_s = horizon_s, peak_s, float(pause_s)
        self.level_jumps = bool(level_jumps)
        self.threshold, self.direction, self.target = threshold_pct_per_h, direction, target
        self.warmup_s = halflife_s / 2 if warmup_s is None else float(warmup_s)
        self._rate = math.log(2.0) / halflife_s
        self.sums = np.zeros(5)  # weights of 1, x, x^2, y, x*y with x in hours since t_prev
        self.t_prev = math.nan
        self.t_warm = math.nan  # when the stretch of data without a long gap began
        if peak_s is not None:
            self.stretch = np.full(5, np.nan)  # the open stretch (see peaks); the last sample's ts
            self.fit = np.full(3, np.nan)  # the line through the last peak: time, slope, level
            # deviation, peaks left out in a row, peaks seen; the last peak taken: its time, the
            # line's slope and level there, and its value; the step the readings come in
            self.guard = np.array([0.0, 0.0, 0.0, np.nan, np.nan, np.nan, np.nan, np.inf])

    def _state_names(self) -> tuple[str, ...]:
        """A line through every sample has no peaks to keep (its state is as it always was)."""
        return self._state_keys if self.peak_s is not None else self._state_keys[:3]

    def _score(self, ts: Floats, value: Floats) -> TrendVerdict:
        if math.isnan(self.t_warm) and ts.size:
            self.t_prev = self.t_warm = float(ts[0])
        if self.peak_s is None:
            gaps = np.diff(np.concatenate([[self.t_prev], ts])) if ts.size else ts
            since = self._stretches(ts, gaps)
            slope, level = self._line(ts, value)
            slope = np.where(ts - since >= self.warmup_s, slope, np.nan)
        else:
            slope, level = self._peak_line(ts, value)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = directed(100.0 * slope / np.abs(level), self.direction)
        due = self._time_to_target(slope, level)
        anomalous = score >= self.threshold if self.horizon_s is None else due <= self.horizon_s
        return TrendVerdict(
            score=score,
            anomalous=anomalous,
            slope_per_h=slope,
            level=level,
            time_to_target_s=due,
            predicted_ts=ts + due,
        )

    def _line(self, ts: Floats, value: Floats) -> tuple[Floats, Floats]:
        """Add points to the weighted line; its slope and level at each point's own time."""
        origin = self.t_prev
        gaps = np.diff(np.concatenate([[origin], ts])) if ts.size else ts
        x = (ts - origin) / HOUR_S
        rows = np.vstack([np.ones_like(x), x, x * x, value, x * value])
        sums = decayed_cumsum(rows, -self._rate * gaps, self.sums)
        slope, level = _fit(sums, x)
        if ts.size:
            self.sums = _recentred(sums[:, -1], float(x[-1]))
            self.t_prev = float(ts[-1])
        return slope, level

    def _peak_line(self, ts: Floats, value: Floats) -> tuple[Floats, Floats]:
        """The line through the peaks, as each sample knows it: the last peak closed by then
        (warmed up, with no long gap since), extended to the sample's own time."""
        assert self.peak_s is not None
        last = self.stretch[4] if ts.size and not np.isnan(self.stretch[4]) else self.t_prev
        since = self._stretches(ts, np.diff(np.concatenate([[last], ts])) if ts.size else ts)
        found = peaks(ts, value, self.peak_s, self.direction == "up", self.stretch[:4])
        slope, level = self._peak_fit(found.ts, found.value)
        warm = found.ts - since[found.known_at] >= self.warmup_s
        at = np.concatenate([self.fit[:1], found.ts])
        slopes = np.concatenate([self.fit[1:2], np.where(warm, slope, np.nan)])
        levels = np.concatenate([self.fit[2:], level])
        known = np.searchsorted(found.known_at, np.arange(ts.size), side="right")
        if ts.size:
            self.stretch = np.r_[found.still_open, ts[-1]]
            self.fit = np.array([at[-1], slopes[-1], levels[-1]])
        gap_since = since > at[known]  # a long gap after that peak: warming up again
        sample_slope = np.where(gap_since, np.nan, slopes[known])
        return sample_slope, levels[known] + slopes[known] * (ts - at[known]) / HOUR_S

    def _peak_fit(self, ts: Floats, value: Floats) -> tuple[Floats, Floats]:
        """Add peaks to the line, one at a time, leaving out a peak far off it: a lone peak
        over it (under it, direction down) is a glitch or a brief high (memory held for
        seconds), and peaks under it for up to ``pause_s`` are a pause (an evaluation that
        cools a GPU for two minutes). Far is 3 robust deviations of the peaks about the line
        (their median absolute deviation, tracked as in ``Plateau``), a deviation never under
        half the step the readings come in (NVML's whole degrees): steady readings would
        otherwise make it nothing, and every degree after far off. Peaks far over it that
        last longer are taken: the climb is real. A left-out peak is judged by the line before
        it. Peaks under it that last longer (the level moved for good), and a peak that rose
        far less than the line from the last one (a climb that stopped, while the line still
        catches up with it), start the line again, flat at the peak and with its weight: a
        line that remembered the climb would go on foretelling it. With ``level_jumps``, so does
        a peak far over it that rose far more than the line from the last one (a jump). A
        loop: one peak a stretch."""
        assert self.peak_s is not None
        dev, streak, seen, at, slope, level, peak, unit = self.guard.tolist()
        sign = 1.0 if self.direction == "up" else -1.0
        limits = (1.0, math.floor(self.pause_s / self.peak_s))  # over the line, under it
        alpha = 1.0 - 0.5 ** (self.peak_s * self._rate / math.log(2.0))  # a half-life of peaks
        slopes, levels = np.empty(ts.size), np.empty(ts.size)
        for j, (t, v) in enumerate(zip(ts.tolist(), value.tolist(), strict=True)):
            climb = sign * slope * (t - at) / HOUR_S  # how far the line moves on since the last
            expected = level + sign * climb
            off = sign * (v - expected)
            fence = math.inf
            if seen >= _PEAKS_SEEN:  # readings in whole degrees: a deviation of at least
                dev = max(dev, unit / 2) if math.isfinite(unit) else dev  # their rounding's
                fence = 3.0 * MAD_SCALE * dev
            side = 0.0 if abs(off) <= fence else math.copysign(1.0, off)
            streak = streak + side if streak * side > 0 else side  # signed: peaks off in a row
            if side and abs(streak) <= limits[side < 0]:
                slopes[j], levels[j] = slope, expected
                continue
            stopped = climb > 0 and sign * (v - peak) < climb - fence  # rose far less than it
            jumped = self.level_jumps and side > 0 and sign * (v - peak) > max(climb, 0) + fence
            if side < 0 or stopped or jumped:  # the level moved for good, the climb stopped or
                # it jumped: the line
                w, sx, sxx = self.sums[:3]  # starts again flat at the peak, keeping its weight
                self.sums = np.array([w, sx, sxx, w * v, sx * v])
                streak = 0.0
            unit = _unit(unit, abs(v - peak))
            fitted = self._line(ts[j : j + 1], value[j : j + 1])
            at, slope, level, peak = t, float(fitted[0][0]), float(fitted[1][0]), v
            slopes[j], levels[j] = slope, level
            if math.isfinite(off) and not side:
                dev = _tracked(dev, abs(off), _share(alpha, seen))
            seen += 1
        self.guard = np.array([dev, streak, seen, at, slope, level, peak, unit])
        return slopes, levels

    def _stretches(self, ts: Floats, gaps: Floats) -> Floats:
        """When each sample's stretch of data began: after the last gap longer than the
        warm-up (or at the first sample)."""
        after_gap = gaps > self.warmup_s
        begun = np.where(after_gap, ts, -np.inf)
        since = np.maximum(np.maximum.accumulate(begun), self.t_warm) if ts.size else ts
        if ts.size:
            self.t_warm = float(since[-1])
        return since

    def warming_up(self) -> Warmup | None:
        seen = 0.0 if math.isnan(self.t_warm) else self._last_ts - self.t_warm
        return Warmup(round(seen, 1), self.warmup_s, "s") if seen < self.warmup_s else None

    def _time_to_target(self, slope: Floats, level: Floats) -> Floats:
        if self.target is None:
            return np.full(slope.shape, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            hours = (self.target - level) / slope
        return np.where(hours >= 0, hours * HOUR_S, np.where(np.isnan(slope), np.nan, np.inf))


def _share(alpha: float, seen: float) -> float:
    """How much a new sample moves a tracked figure: ``alpha``, or a plain mean at first."""
    return alpha if seen * alpha >= 1.0 else 1.0 / (seen + 1.0)


def _unit(unit: float, step: float) -> float:
    """The step the readings come in (whole degrees: 1), from a change between two of them:
    the smallest change while every change is a whole number of it; 0 once one is not (the
    readings are not stepped); inf before any change."""
    if not step > 0 or unit == 0:
        return unit
    if math.isinf(unit):
        return step
    small, big = min(unit, step), max(unit, step)
    ratio = big / small
    return small if abs(ratio - round(ratio)) <= 1e-6 * ratio else 0.0


def _tracked(dev: float, size: float, share: float) -> float:
    """The median absolute deviation tracked online: up or down by a share, never pulled far
    by an outlier."""
    return size if dev == 0 else (dev * (1.0 + share) if size > dev else dev / (1.0 + share))


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
    """A falling series (a loss) whose fall stops, judged against its own recent fall.

    Least-squares lines are fitted to the last ``window`` samples and to the ``history``
    windows before them; falls are relative to each stretch's mean and per window. Anomalous
    when the earlier fall was real (at least ``min_fall``, and ``significance`` standard errors
    of either fit, so that a stop can show through the noise) while the recent fall plus one
    standard error is at most ``ratio`` of it and the recent line is within ``significance`` / 2
    standard errors of flat (a rise is not a plateau either). The ordinary slow-down of
    training keeps falling measurably, so it is not a plateau however young or old the run.
    Outliers either way and a spike with its tail are left out of the fits, so that their
    standard errors are those of the bulk of the noise, not of its heavy tails. Score: recent
    / earlier fall. State: a ring of (1 + ``history``) x ``window`` values and weights.
    """

    _state_keys = ("ring", "count", "line")

    def __init__(
        self,
        window: int = 1000,
        history: int = 2,
        ratio: float = 0.25,
        min_fall: float = 0.005,
        significance: float = 4.0,
    ) -> None:
        super().__init__()
        if window < 10 or history < 1 or not 0 < ratio < 1:
            raise ValueError("need window >= 10, history >= 1 and 0 < ratio < 1")
        if min_fall <= 0 or significance <= 0:
            raise ValueError("min_fall and significance must be > 0")
        self.window, self.history = int(window), int(history)
        self.ratio, self.min_fall = float(ratio), float(min_fall)
        self.significance = float(significance)
        self.line = np.zeros(5)  # level, slope, deviation, left out in a row, counted
        self._span = (1 + self.history) * self.window
        self.ring = np.zeros((2, self._span))  # values, weights (0: outlier or not yet seen)
        self.count = 0

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        inlier = _inliers(value, self.line, self.window // 10)
        y = np.concatenate([self.ring[0], np.where(inlier, value, 0.0)])
        w = np.concatenate([self.ring[1], inlier.astype(np.float64)])
        self.ring = np.vstack([y, w])[:, -self._span :].copy()
        ends = self._span + np.arange(value.size)  # index of each new sample in y
        recent, recent_se = _window_fall(y, w, ends, self.window)
        earlier, earlier_se = _window_fall(y, w, ends - self.window, self.history * self.window)
        earlier, earlier_se = earlier / self.history, earlier_se / self.history  # per window
        full = self.count + np.arange(1, value.size + 1) >= self._span
        self.count += value.size
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(full & (earlier > 0), recent / earlier, np.nan)
            # real, and large enough against the recent window's noise that a stop can show
            real = (earlier >= self.min_fall) & (
                earlier >= self.significance * np.maximum(earlier_se, recent_se)
            )
            # confidently small next to the earlier fall, and neither a measurable fall nor a
            # measurable rise (a spike or a divergence is not a plateau)
            stopped = (recent + recent_se <= self.ratio * earlier) & (
                np.abs(recent) <= self.significance / 2 * recent_se + _FLAT
            )
        return Verdict(score, full & real & stopped)

    def warming_up(self) -> Warmup | None:
        return Warmup(self.count, self._span) if self.count < self._span else None


def _inliers(value: Floats, line: Floats, span: int) -> Bools:
    """Which samples a fit of the trend should use: not outliers, nor a spike and its tail.

    A sample counts unless it stands more than 3 robust deviations (the median absolute
    deviation, scaled) off a local line, above or below: a level and slope smoothed over
    ``span`` samples (Brown's double exponential smoothing) from the samples that counted
    only. Heavy-tailed noise then neither bends the fits nor inflates their standard errors,
    and a line with a slope does not lag a falling loss as a level would (which would leave
    out its lower half). Leaving out a whole spike, tail included, keeps it from bending the
    fits. After ``span`` samples left out in a row the level has moved for good and is taken
    as it is. ``line`` (level, slope, deviation, left out in a row, counted) is updated in
    place. A loop: this reads one loss sample per step.
    """
    keep = np.ones(value.shape, dtype=bool)
    level, slope, dev, streak, seen = line.tolist()
    alpha = 1.0 - 0.5 ** (1.0 / span)
    fence = 3.0 * MAD_SCALE * dev
    for i, x in enumerate(value.tolist()):
        if seen == 0 or streak >= span:  # the first sample, or a level moved for good
            level, slope, streak, seen = x, 0.0, 0, max(seen, 1)
            continue
        level += slope
        off = x - level
        size = abs(off)
        if size > fence and seen >= _MIN_SEEN:
            keep[i], streak = False, streak + 1
            continue
        a = _share(alpha, seen)
        streak, seen = 0, seen + 1
        dev = _tracked(dev, size, a)
        fence = 3.0 * MAD_SCALE * dev
        level += a * (2.0 - a) * off  # Brown's double smoothing: no lag on a steady fall
        slope += a * a * off
    line[:] = (level, slope, dev, streak, seen)
    return keep


def _window_fall(y: Floats, w: Floats, ends: np.ndarray, n: int) -> tuple[Floats, Floats]:
    """Relative fall of the weighted least-squares line over ``(end - n, end]`` of ``y`` for
    each end, and its standard error; NaN where fewer than half the samples count."""
    x = np.arange(y.size, dtype=np.float64) - y.size / 2
    sums = np.cumsum(np.vstack([w, w * x, w * x * x, w * y, w * x * y, w * y * y]), axis=1)
    sums = np.hstack([np.zeros((6, 1)), sums])
    k, sx, sxx, sy, sxy, syy = sums[:, ends + 1] - sums[:, ends + 1 - n]
    with np.errstate(divide="ignore", invalid="ignore"):
        xx = sxx - sx * sx / k
        slope = (sxy - sx * sy / k) / xx
        residual = np.maximum(syy - sy * sy / k - slope * slope * xx, 0.0) / (k - 2)
        level = np.abs(sy / k)
        fall = -slope * n / level
        se = np.sqrt(residual / xx) * n / level
    enough = k >= n / 2
    return np.where(enough, fall, np.nan), np.where(enough, se, np.nan)


class Rise(Detector):
    """A smoothed series standing well above its own recent best: a loss that diverges.

    The series is smoothed by an EWMA over ``halflife`` samples (counted after two half-lives);
    score is how far the smoothed value is above the lowest smoothed value of the last
    ``window`` samples, relative to it; anomalous from ``rise`` (0.1 = 10 %). A transient
    spike lifts it briefly, a divergence for good: hold it with the rule's ``for``. State: a
    ring of ``window`` smoothed values.
    """

    _state_keys = ("sums", "ring", "count")

    def __init__(self, rise: float = 0.1, halflife: float = 50.0, window: int = 1000) -> None:
        super().__init__()
        if rise <= 0 or halflife <= 0 or window < 2:
            raise ValueError("rise and halflife must be > 0 and window >= 2")
        self.rise, self.window = float(rise), int(window)
        self._log_decay = -math.log(2.0) / halflife
        self._warmup = math.ceil(2 * halflife)
        self.sums = np.zeros(2)
        self.ring = np.full(self.window - 1, np.inf)
        self.count = 0

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        if not value.size:
            return BaselineVerdict(np.empty(0), np.empty(0, dtype=bool), np.empty(0))
        both = decayed_cumsum(
            np.vstack([value, np.ones(value.shape)]),
            np.full(value.shape, self._log_decay),
            self.sums,
        )
        seen = self.count + np.arange(1, value.size + 1)
        smooth = np.where(seen >= self._warmup, both[0] / both[1], np.inf)
        self.count += value.size
        self.sums = both[:, -1].copy()
        history = np.concatenate([self.ring, smooth])
        best = np.lib.stride_tricks.sliding_window_view(history, self.window).min(axis=1)
        self.ring = history[-(self.window - 1) :].copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(np.isfinite(smooth), smooth / np.abs(best) - 1.0, np.nan)
        return BaselineVerdict(score, score >= self.rise, np.where(np.isfinite(best), best, np.nan))

    def warming_up(self) -> Warmup | None:
        return Warmup(self.count, self._warmup) if self.count < self._warmup else None
