"""The peak of each stretch of data time, for a trend fitted to highs (or lows) only.

What breaks is the peak: an allocation at its high-water mark runs out of memory, the hottest
minute throttles. A line through the peak of each ``peak_s`` of data time is not tilted by dips
shorter than that (an evaluation pause that cools a GPU, the caching allocator freeing memory
between its highs), while a climb moves every peak with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._base import Floats

__all__ = ["Peaks", "peaks"]


@dataclass(frozen=True)
class Peaks:
    """The peaks a batch closed: when and what each was, the index of the sample at which it
    became known (the first sample of a later stretch), and the stretch still open after the
    batch (``[stretch number, peak value, peak time, whole]``, NaN when none; whole is 0 for
    the stretch the data began in, whose peak misses the samples before it)."""

    ts: Floats
    value: Floats
    known_at: np.ndarray
    still_open: Floats


def peaks(ts: Floats, value: Floats, peak_s: float, up: bool, still_open: Floats) -> Peaks:
    """The highest (``up``) or lowest sample of each stretch ``[k * peak_s, (k + 1) * peak_s)``
    of data time, carried across batches, so that any cut of the stream gives the same peaks.
    Ties go to the latest sample: a flat top's peak is where it ends, a stretch after the last."""
    if not ts.size:
        return Peaks(np.empty(0), np.empty(0), np.empty(0, np.int64), still_open.copy())
    stretch = np.floor(ts / peak_s)
    starts = np.flatnonzero(np.r_[True, stretch[1:] != stretch[:-1]])
    ids = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, ts.size]))
    latest = -np.arange(ts.size)
    best = np.lexsort((latest, -value if up else value, ids))  # by stretch, best, latest first
    first = best[np.r_[True, ids[best][1:] != ids[best][:-1]]]
    p_ts, p_value = ts[first], value[first]
    known_at = np.r_[starts[1:], -1]  # the last stretch stays open
    whole = np.ones(starts.size)
    carried, carried_value, carried_ts, carried_whole = still_open.tolist()
    if np.isnan(carried):
        whole[0] = 0.0  # the data begins in this stretch
    elif carried == stretch[0]:
        whole[0] = carried_whole
        if (carried_value > p_value[0]) if up else (carried_value < p_value[0]):
            p_ts[0], p_value[0] = carried_ts, carried_value
    elif carried_whole:  # the open stretch ended before this batch's first sample
        p_ts, p_value = np.r_[carried_ts, p_ts], np.r_[carried_value, p_value]
        known_at, whole = np.r_[0, known_at], np.r_[1.0, whole]
    opened = np.array([stretch[-1], p_value[-1], p_ts[-1], whole[-1]])
    kept = whole[:-1] > 0
    return Peaks(p_ts[:-1][kept], p_value[:-1][kept], known_at[:-1][kept].astype(np.int64), opened)
