"""Streaming detectors for one series each: non-finite, threshold, hold-for, robust z, CUSUM."""

from __future__ import annotations

import math
from typing import Any, ClassVar

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
    baseline that judges the next spike. ``halflife`` and ``warmup`` count samples;
    ``level_halflife`` (default ``halflife``) lets the level follow a trending series closely
    (a falling loss) while the deviation still averages over ``halflife``: a level that lags a
    trend inflates the deviation and hides a spike.
    """

    _state_keys = ("plain", "robust", "count")

    def __init__(
        self,
        z: float = 6.0,
        halflife: float = 100.0,
        warmup: int = 30,
        direction: Direction = "up",
        level_halflife: float | None = None,
    ) -> None:
        super().__init__()
        check_direction(direction)
        level_halflife = halflife if level_halflife is None else level_halflife
        if z <= 0 or halflife <= 0 or level_halflife <= 0 or warmup < 2:
            raise ValueError("z and the half-lives must be > 0 and warmup >= 2")
        self.z, self.warmup, self.direction = float(z), int(warmup), direction
        self._log_decay = -math.log(2.0) / halflife
        self._level_decay = -math.log(2.0) / level_halflife
        self.plain = np.zeros((2, 2))
        self.robust = np.zeros((2, 2))
        self.count = 0

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        decay = np.vstack(
            [np.full(value.shape, self._level_decay), np.full(value.shape, self._log_decay)]
        )
        warm = self.count + np.arange(value.size) >= self.warmup
        everything = np.ones(value.shape)
        z_plain, _, self.plain = _robust_z(value, everything, decay, self.plain)
        inlier = ~(warm & (np.abs(z_plain) >= self.z))
        z, level, self.robust = _robust_z(value, inlier.astype(np.float64), decay, self.robust)
        self.count += value.size
        score = np.where(warm, directed(z, self.direction), np.nan)
        return BaselineVerdict(score, warm & (score >= self.z), level)

    def warming_up(self) -> Warmup | None:
        return Warmup(self.count, self.warmup) if self.count < self.warmup else None


def _robust_z(
    x: Floats, weight: Floats, decay: Floats, state: Floats
) -> tuple[Floats, Floats, Floats]:
    """z of each sample against the level and deviation it sees, that level, and the new
    [level sums, dev sums]."""
    # decay has two rows: the level's and the deviation's log decay per sample
    level, level_sums = ewm_before(x, weight, decay[0], state[0])
    diff = x - level
    dev_weight = weight * np.isfinite(level)
    mad, dev_sums = ewm_before(
        np.where(dev_weight > 0, np.abs(diff), 0.0), dev_weight, decay[1], state[1]
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        z = diff / (MAD_SCALE * mad)
    return np.where(diff == 0, 0.0, z), level, np.vstack([level_sums, dev_sums])


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
        return BaselineVerdict(score, live & (score >= self.threshold), np.exp(ref))

    def warming_up(self) -> Warmup | None:
        return Warmup(self.count, self.warmup) if self.count < self.warmup else None


def _cusum(step: Floats, start: float) -> Floats:
    """``g_j = max(0, g_{j-1} + step_j)`` from ``g = start``, as the walk minus its running min."""
    walk = start + np.cumsum(step)
    return walk - np.minimum(np.minimum.accumulate(walk), 0.0) if step.size else walk


class Share(Detector):
    """A condition (``value op level``) that held for at least ``share`` of the samples of the
    last ``window_s`` seconds of data time: "sustained" that brief dips do not reset.

    With ``share`` 0.5 this is the window's median beyond the level (PromQL's
    ``quantile_over_time(0.5, …)``): a GPU hot for five minutes but cooler for the moments
    of an evaluation pause is still hot. Score is the share; nothing is anomalous before a
    whole window of data has been seen. A window whose samples span less than ``share`` of it
    (after a gap in the data) cannot show that the condition held for ``share`` of it, nor
    that it did not: such a sample keeps the previous decision, so a gap neither fires the
    rule (one sample after a gap is not "100 % of the window") nor resolves it. State: the
    samples of one window and the last decision.
    """

    _state_keys = ("ring_ts", "ring_hit", "t_first", "decided")

    def __init__(self, level: float, op: str = ">", window_s: float = 300.0, share: float = 0.5):
        super().__init__()
        if op not in _OPS or window_s <= 0 or not 0 < share <= 1:
            raise ValueError(f"need op in {tuple(_OPS)}, window_s > 0 and 0 < share <= 1")
        self.level, self.op = float(level), op
        self.window_s, self.share = float(window_s), float(share)
        self.ring_ts = np.empty(0)
        self.ring_hit = np.empty(0)
        self.t_first = math.nan
        self.decided = False

    def _score(self, ts: Floats, value: Floats) -> Verdict:
        if not ts.size:
            return BaselineVerdict(np.empty(0), np.empty(0, dtype=bool), np.empty(0))
        if math.isnan(self.t_first):
            self.t_first = float(ts[0])
        all_ts = np.concatenate([self.ring_ts, ts])
        hits = np.concatenate([self.ring_hit, _OPS[self.op](value, self.level).astype(np.float64)])
        ends = self.ring_ts.size + np.arange(ts.size)
        starts = np.searchsorted(all_ts, ts - self.window_s, side="right")
        counts = np.concatenate([[0.0], np.cumsum(hits)])
        share = (counts[ends + 1] - counts[starts]) / (ends + 1 - starts)
        keep = all_ts > ts[-1] - self.window_s
        self.ring_ts, self.ring_hit = all_ts[keep], hits[keep]
        full = ts - self.t_first >= self.window_s
        covered = ts - all_ts[starts] >= self.share * self.window_s
        decision = np.where(covered, full & (share >= self.share), np.nan)
        anomalous = _carried(decision, self.decided)
        self.decided = bool(anomalous[-1])
        return BaselineVerdict(share, anomalous, np.full(ts.shape, self.level))

    def warming_up(self) -> Warmup | None:
        seen = 0.0 if math.isnan(self.t_first) else self._last_ts - self.t_first
        return Warmup(round(seen, 1), self.window_s, "s") if seen < self.window_s else None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The window holds as many samples as it holds: its length is free."""
        if set(state) != {*self._state_keys, "last_ts"}:
            raise ValueError(f"state keys {sorted(state)} != {sorted(self.state_dict())}")
        self.ring_ts = np.array(state["ring_ts"], dtype=np.float64)
        self.ring_hit = np.array(state["ring_hit"], dtype=np.float64)
        self.t_first = float(state["t_first"])
        self.decided = bool(state["decided"])
        self._last_ts = float(state["last_ts"])


def _carried(decision: Floats, before: bool) -> Bools:
    """Each NaN of ``decision`` (1.0 or 0.0 elsewhere) replaced by the decision before it."""
    index = np.arange(decision.size)
    last = np.maximum.accumulate(np.where(np.isnan(decision), -1, index))
    return np.where(last >= 0, decision[np.maximum(last, 0)], float(before)) > 0.5
