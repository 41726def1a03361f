"""When a run will reach its planned last step, with an interval: the steps left at the pace
of its productive steps, plus the pauses still to come.

Evaluation and checkpoints pause a run every so many steps: a naive ETA (steps left × the
recent step time) misses them, or counts one as the pace when it just happened. So the steps
are split into productive ones and pauses (a step taking well over the typical); pauses that
recur at a fixed step period (evaluation, checkpoints) are expected again at that period and
cost, the others (stalls, restarts) at the rate and cost seen so far. The pace's own
uncertainty is how far it has wandered over the run, not only the noise of its last steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._resample import resample_blocks

__all__ = ["Eta", "Pauses", "forecast_eta", "is_pause"]

#: The fewest steps seen before an ETA is made.
MIN_STEPS = 20
#: Productive steps that set the pace: the latest this many.
_PACE_STEPS = 500
#: A step is a pause when it takes more than this many typical steps (and 5 MADs) longer.
_PAUSE_FACTOR = 1.5
_DRAWS = 400
#: Stretches of the productive history whose mean paces show how far the pace wanders.
_STRETCHES = 10
#: Pauses fewer steps apart than this are not taken for a cadence.
_MIN_PERIOD = 10
_BLOCK = 20


@dataclass(frozen=True, slots=True)
class Pauses:
    """Pauses seen: those recurring every ``period`` steps from step ``phase`` (period 0:
    none found), their typical cost and count; the others' count and total cost."""

    period: int
    phase: int
    periodic_s: float
    periodic: int
    other: int
    other_s: float


@dataclass(frozen=True, slots=True)
class Eta:
    """Seconds from the last step seen to the planned last step: p50 and its p10–p90; the
    productive step time, the pauses seen and the naive figure (steps left × recent pace)."""

    at_step: int
    planned_total_steps: int
    eta_s: float
    eta_s_p10: float
    eta_s_p90: float
    step_s: float
    pauses: Pauses
    naive_s: float


def forecast_eta(steps: np.ndarray, ts: np.ndarray, planned_total_steps: int) -> Eta | None:
    """The ETA from the time each step was seen (``ts`` of ``steps``, in any order, a step
    seen again after a restart counting at its last time); None with fewer than
    ``MIN_STEPS`` steps or none left."""
    step, at = _last_per_step(steps, ts)
    total = int(planned_total_steps)
    if len(step) < MIN_STEPS or step[-1] >= total - 1:
        return None
    per_step = np.diff(at) / np.maximum(np.diff(step), 1)  # a gap in logging spreads evenly
    pause = is_pause(per_step, per_step)
    productive = per_step[~pause]
    pace = productive[-_PACE_STEPS:]
    left = total - 1 - int(step[-1])
    at, extra = _events(step[1:], per_step - float(np.median(pace)), pause)
    pauses, on = _classify(at, extra, int(step[0]), int(step[-1]))
    rng = np.random.default_rng(0)
    draws = _draws(productive, pace, left, rng) + _pauses_ahead(
        pauses, extra[on], extra[~on], int(step[-1]), total, len(step), rng
    )
    p10, p50, p90 = np.quantile(draws, [0.1, 0.5, 0.9]).tolist()
    naive = left * float(np.mean(per_step[-min(len(per_step), 50) :]))
    return Eta(int(step[-1]), total, p50, p10, p90, float(np.mean(pace)), pauses, naive)


def _last_per_step(steps: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct steps in order, each at the last time it was seen; a step time that goes
    back (a restart) keeps the later one."""
    s, t = np.asarray(steps, np.int64), np.asarray(ts, np.float64)
    keep = np.isfinite(t) & (s >= 0)
    s, t = s[keep], t[keep]
    order = np.lexsort((t, s))
    s, t = s[order], t[order]
    last = np.r_[s[1:] != s[:-1], True] if len(s) else np.zeros(0, bool)
    s, t = s[last], t[last]
    monotone = np.maximum.accumulate(t) if len(t) else t
    return s, monotone


def _events(
    step: np.ndarray, extra: np.ndarray, pause: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pauses as events: the first step of each run of consecutive paused steps, and the time
    they took together over the pace. An evaluation often slows the step after it as well
    (its memory given back, caches cold): one pause, which recurs as one."""
    at, over = step[pause], extra[pause]
    starts = np.r_[True, np.diff(at) > 1] if len(at) else np.zeros(0, bool)
    return at[starts], np.add.reduceat(over, np.flatnonzero(starts)) if len(at) else over


def is_pause(took: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Which step times are pauses: well above the typical of ``reference``."""
    median = float(np.median(reference))
    mad = float(np.median(np.abs(reference - median)))
    return np.asarray(took > median * (1 + _PAUSE_FACTOR) + 5 * 1.4826 * mad)


def _classify(
    at: np.ndarray, extra: np.ndarray, first: int, last: int
) -> tuple[Pauses, np.ndarray]:
    """Split pauses into those recurring at one step period and the others; and which are
    periodic. A period (a gap between two pauses) holds when pauses fall on at least 80 % of
    its steps after the first step seen (``first``) up to the last (``last``): random stalls a
    gap apart leave most of that lattice empty, evaluation every N steps fills it. Twice is
    enough on multiples of the period (as trainers schedule evaluation and checkpoints), three
    times elsewhere. Of those that hold, the one that places most pauses."""
    off = np.zeros(len(at), bool)
    best: tuple[int, int, int] | None = None  # hits, period, phase
    for period in np.unique(np.abs(at[:, None] - at[None, :])).tolist():
        if period < _MIN_PERIOD:
            continue
        for phase in np.unique(at % period).tolist():
            on = at % period == phase
            start = first + 1 + (phase - first - 1) % period  # the first step has no time
            slots = (last - start) // period + 1
            hits = int(on.sum())
            aligned = phase in (0, 1, period - 1)  # every N steps, as trainers count them
            if hits < (2 if aligned else 3) or hits < 0.8 * slots:
                continue
            if best is None or hits > best[0]:
                best = (hits, period, phase)
    if best is None:
        return Pauses(0, 0, 0.0, 0, len(at), float(extra.sum())), off
    _, period, phase = best
    on = at % period == phase
    costs = (float(np.median(extra[on])), int(on.sum()), int((~on).sum()), float(extra[~on].sum()))
    return Pauses(period, phase, *costs), on


def _pauses_ahead(
    pauses: Pauses,
    periodic: np.ndarray,
    other: np.ndarray,
    last: int,
    total: int,
    seen: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Seconds of pauses in the steps left (``last`` + 1 to ``total`` - 1), a draw each: the
    periodic ones at their period, their costs resampled from those seen; the others as many
    as their rate per step (uncertain after few) gives, at costs resampled likewise."""
    left = total - 1 - last
    out = np.zeros(_DRAWS)
    if pauses.period:
        first = last + 1 + (pauses.phase - last - 1) % pauses.period
        if first <= total - 1:
            n = (total - 1 - first) // pauses.period + 1
            out += rng.choice(periodic, size=(_DRAWS, n)).sum(axis=1)
    rate = rng.gamma(len(other) + 0.5, 1.0 / max(seen, 1), _DRAWS)
    count = rng.poisson(rate * left)
    if len(other):
        out += np.array([rng.choice(other, size=k).sum() for k in count.tolist()])
    return out


def _draws(
    productive: np.ndarray, pace: np.ndarray, left: int, rng: np.random.Generator
) -> np.ndarray:
    """Seconds of ``left`` productive steps: the recent pace, give or take how far the pace
    has wandered over the run: the spread of its means over stretches of the history beyond
    what the noise of single steps would give them, which outlasts that noise."""
    stretches = np.array_split(productive, max(2, min(_STRETCHES, len(productive) // _BLOCK)))
    means = np.array([c.mean() for c in stretches])
    noise = float(np.mean([c.var() / len(c) for c in stretches]))
    wander = float(np.sqrt(max(float(np.var(means, ddof=1)) - noise, 0.0)))
    drawn = [resample_blocks(pace, _BLOCK, rng).mean() for _ in range(_DRAWS)]
    return (np.asarray(drawn) + rng.normal(0.0, wander, _DRAWS)) * left
