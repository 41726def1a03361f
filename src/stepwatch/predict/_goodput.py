"""Where a run's wall time went: productive steps, and the badput beside them (start-up, data
wait, evaluation, checkpoints, stalls, and progress lost to restarts), in the spirit of the
goodput buckets of Google's ml-goodput-measurement.

The steps are read in the order they happened. A step done again after a restart makes the
first time it was done lost, and so is the wait before it was done again; of the steps that
count, those taking well over the typical step are pauses: evaluation when the run logged an
evaluation at that step, a checkpoint when it logged one (its write time when it says it),
else a stall. Data wait is what the steps that count say they waited for their batch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ._eta import is_pause

__all__ = ["Goodput", "goodput"]


@dataclass(frozen=True, slots=True)
class Goodput:
    """Seconds of a run's wall time, split; ``productive_s`` is what is left of the wall time
    once the badput is taken out."""

    wall_s: float
    productive_s: float
    startup_s: float
    data_wait_s: float
    evaluation_s: float
    checkpoint_s: float
    stalls_s: float
    lost_s: float

    @property
    def share(self) -> float:
        """Productive time over wall time."""
        return self.productive_s / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "goodput": self.share}


def goodput(
    start: float,
    steps: np.ndarray,
    ts: np.ndarray,
    *,
    data_wait: tuple[np.ndarray, np.ndarray] | None = None,
    evaluations: np.ndarray | None = None,
    checkpoints: tuple[np.ndarray, np.ndarray] | None = None,
) -> Goodput | None:
    """The split of a run started at ``start`` whose steps ended at ``ts``; ``data_wait``:
    (steps, seconds waited for the batch); ``evaluations``: steps at which it evaluated;
    ``checkpoints``: (steps, seconds writing; NaN when unknown). None before two steps."""
    s, t = np.asarray(steps, np.int64), np.asarray(ts, np.float64)
    keep = np.isfinite(t) & (s >= 0)
    order = np.argsort(t[keep], kind="stable")
    s, t = s[keep][order], t[keep][order]
    if len(s) < 2:
        return None
    took = np.diff(t)
    lost = _done_again(s)[1:] | (s[1:] <= s[:-1])  # superseded, or the wait of a restart
    counts = ~lost
    extra = np.zeros_like(took)
    typical = float(np.median(took[counts])) if counts.any() else 0.0
    pause = counts & is_pause(took, took[counts])
    extra[pause] = took[pause] - typical
    at = s[1:]
    evaluation = pause & np.isin(at, _steps(evaluations))
    ckpt_steps, ckpt_s = _pairs(checkpoints)
    checkpoint = pause & ~evaluation & np.isin(at, ckpt_steps)
    written = _at(ckpt_steps, ckpt_s, at[checkpoint])
    checkpoint_s = float(np.where(np.isfinite(written), np.minimum(written, extra[checkpoint]),
                                  extra[checkpoint]).sum())  # fmt: skip
    waits = _at(*_pairs(data_wait), at[counts])
    data_s = float(np.nansum(np.minimum(waits, took[counts] - extra[counts])))
    wall = float(t[-1] - start)
    parts = {
        "startup_s": max(float(t[0] - start), 0.0),
        "data_wait_s": data_s,
        "evaluation_s": float(extra[evaluation].sum()),
        "checkpoint_s": checkpoint_s,
        "stalls_s": float(extra[pause & ~evaluation & ~checkpoint].sum()),
        "lost_s": float(took[lost].sum()),
    }
    return Goodput(wall, max(wall - sum(parts.values()), 0.0), **parts)


def _done_again(s: np.ndarray) -> np.ndarray:
    """Which records (in time order) are of a step done again later."""
    last = {int(v): i for i, v in enumerate(s.tolist())}
    return np.array([last[int(v)] != i for i, v in enumerate(s.tolist())])


def _steps(values: np.ndarray | None) -> np.ndarray:
    return np.zeros(0, np.int64) if values is None else np.asarray(values, np.int64)


def _pairs(pairs: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    if pairs is None:
        return np.zeros(0, np.int64), np.zeros(0)
    return np.asarray(pairs[0], np.int64), np.asarray(pairs[1], np.float64)


def _at(steps: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The value logged at each wanted step (the last, if several), NaN where none was."""
    out = np.full(len(wanted), np.nan)
    if len(steps):
        table = dict(zip(steps.tolist(), values.tolist(), strict=True))
        out[:] = [table.get(int(w), np.nan) for w in wanted.tolist()]
    return out
