"""The points a loss law is fitted to, shared by a run's forecast and its project's law: the
loss per distinct step, in buckets past the curve's early transient, at the rate's areas."""

from __future__ import annotations

import numpy as np

from ._loss_law import ANNEALING_MOMENTUM, lr_areas

__all__ = ["FINAL_WINDOW", "areas", "buckets", "per_step"]

#: "Final loss" is the mean training loss over this many last planned steps.
FINAL_WINDOW = 50
#: The most points a curve is fitted on.
_BUCKETS = 300


def per_step(steps: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct steps in order, each with its mean finite loss."""
    s, v = np.asarray(steps, np.int64), np.asarray(loss, np.float64)
    keep = np.isfinite(v) & (s >= 0)
    uniq, inverse = np.unique(s[keep], return_inverse=True)
    sums = np.bincount(inverse, weights=v[keep], minlength=len(uniq))
    return uniq, sums / np.bincount(inverse, minlength=len(uniq))


def areas(path: np.ndarray, momentum: float = ANNEALING_MOMENTUM) -> tuple[np.ndarray, np.ndarray]:
    """S1 and S2 of a path, S1 kept above 0 (a rate of 0 at the first steps of a warm-up)."""
    s1, s2 = lr_areas(path, momentum)
    floor = max(float(np.max(s1)) * 1e-9, 1e-12)
    return np.maximum(s1, floor), s2


def buckets(steps: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Up to ``_BUCKETS`` points over the seen steps past their first tenth: the middle step
    and mean loss of each; and the loss's step-to-step noise about those means."""
    start = steps[0] + (steps[-1] - steps[0]) // 10
    s, v = steps[steps >= start], loss[steps >= start]
    edges = np.linspace(s[0], s[-1] + 1, min(_BUCKETS, len(s)) + 1)
    index = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, len(edges) - 2)
    count = np.bincount(index, minlength=len(edges) - 1)
    used = count > 0
    mean = np.bincount(index, weights=v, minlength=len(edges) - 1)[used] / count[used]
    middle = (np.bincount(index, weights=s, minlength=len(edges) - 1)[used] / count[used]).astype(
        np.int64
    )
    noise = float(np.std(v - mean[np.cumsum(used)[index] - 1])) if len(v) > 1 else 0.0
    return middle, mean, noise
