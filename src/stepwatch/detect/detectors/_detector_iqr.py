"""Tukey's fences over a ring of recent samples (loss spikes): quartiles of the last ``window``
samples, or of the residuals about their robust line while the window falls steeply."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ._base import (
    BaselineVerdict,
    Bools,
    Detector,
    Direction,
    Floats,
    Verdict,
    Warmup,
    check_direction,
    directed,
)

#: A run of samples beyond the fences whose first one lies this many ``k`` out is a spike's.
FAR_OUT = 1.5
#: A line is steep when it moves this share of its level across a window: the fall of a young
#: run's loss (far more in its first steps), not the tilt noise gives a flat one (a few %).
STEEP = 0.1


class IqrFence(Detector):
    """Tukey's fences: a value beyond the quartiles of the last ``window`` samples by ``k``
    interquartile ranges (``k`` 3: "far out"). Quartiles ignore how far out the tails reach,
    so a few earlier outliers do not widen the fence. Score is the distance past the nearer
    quartile in IQRs (``direction`` signed); nothing is scored before ``warmup`` samples.

    With ``detrend`` the fences stand around the window's robust line while it is ``STEEP``:
    the quartiles are those of the residuals from it, and a value is judged by its distance
    from the line's next point, so a steep trend (a young run's falling loss) no longer widens
    the fences, only the noise about it does; a flatter window is judged as without. A run
    of samples beyond the fences that began ``FAR_OUT`` fences out (a spike's first ones, not
    a heavy tail's) is left out of the window that judges the next sample, up to a quarter
    of the window: a spike does not hide its own later samples. Baseline: the window's
    median, or the line's point. State: a ring of ``window`` values (a quarter more with
    ``detrend``) and that run.
    """

    _state_keys = ("ring", "run", "far")

    def __init__(
        self,
        k: float = 3.0,
        window: int = 200,
        warmup: int | None = None,
        direction: Direction = "up",
        detrend: bool = False,
    ) -> None:
        super().__init__()
        check_direction(direction)
        warmup = window // 2 if warmup is None else warmup
        if k <= 0 or window < 4 or not 4 <= warmup <= window:
            raise ValueError("need k > 0, window >= 4 and 4 <= warmup <= window")
        self.k, self.window, self.warmup, self.direction = float(k), int(window), warmup, direction
        self.detrend = bool(detrend)
        self.guard = self.window // 4 if self.detrend else 0
        self.ring = np.full(self.window + self.guard, np.nan)
        self.run = 0  # samples beyond the fences at the end of the ring, up to ``guard``
        self.far = False  # whether their run began FAR_OUT fences out

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        history = np.concatenate([self.ring, value])
        self.ring = history[-self.ring.size :].copy()
        if not value.size:
            return BaselineVerdict(np.empty(0), np.empty(0, dtype=bool), np.empty(0))
        windows = np.lib.stride_tricks.sliding_window_view(history[:-1], self.ring.size)
        recent = windows[:, self.guard :]
        enough = np.isfinite(recent).sum(axis=1) >= self.warmup
        signed, baseline = _fenced(value, recent, 0.0)
        if self.guard:
            trended = _fenced(value, *_robust_line(recent, np.zeros(value.size))[:2])[0]
            beyond = enough & (np.abs(trended) >= self.k)
            skip = self._skipped(beyond, np.abs(trended) >= FAR_OUT * self.k)
            cols = (self.guard - skip)[:, None] + np.arange(self.window)
            judged = np.take_along_axis(windows, cols, 1)
            spread, line, steep = _robust_line(judged, skip.astype(np.float64))
            trended, on_line = _fenced(value, spread, line)
            # not above where the series stands: no spike, however far above the line
            trended = np.where(value > _level(judged, self.guard), trended, np.minimum(trended, 0))
            signed, baseline = np.where(steep, trended, signed), np.where(steep, on_line, baseline)
        score = np.where(enough, directed(signed, self.direction), np.nan)
        return BaselineVerdict(score, score >= self.k, baseline)

    def _skipped(self, beyond: Bools, far: Bools) -> NDArray[np.int64]:
        """How many samples just before each one to leave out of its window: the run of
        samples beyond the fences it ends, when that run began far out, up to ``guard``."""
        index = np.arange(beyond.size)
        clear = np.maximum.accumulate(np.where(beyond, -1, index))
        before = np.concatenate([[-1], clear[:-1]])
        run = np.where(before >= 0, index - 1 - before, index + self.run)
        carried = self.far if self.run else bool(far[0])
        began_far = np.where(before >= 0, far[np.minimum(before + 1, beyond.size - 1)], carried)
        if beyond[-1]:
            self.run = min(int(run[-1]) + 1, self.guard)
            self.far = bool(far[clear[-1] + 1]) if clear[-1] >= 0 else carried
        else:
            self.run, self.far = 0, False
        return np.where(began_far, np.minimum(run, self.guard), 0)

    def warming_up(self) -> Warmup | None:
        seen = int(np.isfinite(self.ring[self.guard :]).sum())
        return Warmup(seen, self.warmup) if seen < self.warmup else None


def _fenced(value: Floats, spread: Floats, level: Floats | float) -> tuple[Floats, Floats]:
    """Signed distance of each value past the fences of its window's ``spread`` about
    ``level`` (NaN without a spread), and the baseline: the spread's median plus the level."""
    with np.errstate(invalid="ignore", divide="ignore"):
        q1, q3, median = _percentiles(spread, [25.0, 75.0, 50.0])
        iqr = q3 - q1
        q1, q3 = q1 + level, q3 + level
        above, below = (value - q3) / iqr, (q1 - value) / iqr
    signed = np.where(value >= q3, above, np.where(value <= q1, -below, 0.0))
    return np.where(iqr > 0, signed, np.nan), median + level


def _percentiles(windows: Floats, q: list[float]) -> Floats:
    """``nanpercentile`` along each window, the windows without a gap (all but a series'
    first) at ``percentile``'s vectorised pace: ``nanpercentile`` goes row by row. A window
    still all NaN is NaN without numpy's warning (warning filters are not thread-safe)."""
    out = np.full((len(q), windows.shape[0]), np.nan)
    full = np.isfinite(windows).all(axis=1)
    out[:, full] = np.percentile(windows[full], q, axis=1)
    gaps = ~full & ~np.isnan(windows).all(axis=1)
    out[:, gaps] = np.nanpercentile(windows[gaps], q, axis=1)
    return out


def _level(windows: Floats, last: int) -> Floats:
    """The median of each window's ``last`` samples: where the series stands now. A falling
    curve that flattens (a young run's loss past its steepest steps) stands above the line
    drawn through the window, noise and all; a spike rises above where the series stands,
    not only above that line."""
    return _percentiles(windows[:, -last:], [50.0])[0]


def _robust_line(windows: Floats, ahead: Floats) -> tuple[Floats, Floats, Bools]:
    """Each window's residuals from its robust line, the line's point ``ahead`` samples past
    the window's next one, and whether the line is ``STEEP``.

    The slope is the median of the slopes between the samples ``lag`` apart, ``lag`` half the
    span from the window's first finite sample to its end, each sample in one pair at most:
    long spans leave little noise in each slope, and a run of outliers shorter than a quarter
    of the window cannot carry the median off. The intercept is the median of what the slope
    leaves. A window's missing samples lead it (the ring's start), so the pairs end at its end.
    """
    rows, size = windows.shape
    finite = np.isfinite(windows)
    first = np.where(finite.any(axis=1), finite.argmax(axis=1), size)
    lag = np.maximum((size - first) // 2, 1)
    pair = np.arange(size // 2)
    right = np.broadcast_to(size - 1 - pair, (rows, pair.size))
    left = np.maximum(right - lag[:, None], 0)
    picked = np.take_along_axis(windows, right, 1) - np.take_along_axis(windows, left, 1)
    step = np.arange(size)
    with np.errstate(invalid="ignore"):  # infinite samples
        slope = _percentiles(np.where(pair < lag[:, None], picked, np.nan), [50.0])[0] / lag
        intercept = _percentiles(windows - slope[:, None] * step, [50.0])[0]
    residuals = windows - intercept[:, None] - slope[:, None] * step
    steep = np.abs(slope) * size >= STEEP * np.abs(intercept + slope * (size - 1) / 2)
    return residuals, intercept + slope * (size + ahead), steep
