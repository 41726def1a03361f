"""Where the loss will land: the mean training loss over the last ``FINAL_WINDOW`` planned
steps, forecast from the steps seen so far with a p10–p90 interval.

The law of the learning rate's areas is fitted to the loss seen (in step buckets, the first
tenth of it left out: the early transient no law follows), and run forward along the learning
rate of the steps to come. Those are the stated schedule's; without one, the rate last seen
held or brought down to nothing by the end, both taken (a wider interval); without any rate
at all, a power law in steps. The interval is that of refits to the curve with its residuals
resampled in blocks (they run in stretches, not step by step), plus the noise of a mean over
the final window's steps still to come (those already seen count as they were).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._loss_law import LossLaw, Shape, lr_areas
from ._resample import resample_blocks
from ._schedule import LrSchedule

__all__ = ["FINAL_WINDOW", "Cone", "LossForecast", "forecast_final_loss"]

#: "Final loss" is the mean training loss over this many last planned steps.
FINAL_WINDOW = 50
#: The fewest distinct steps seen before a forecast is made.
MIN_STEPS = 20
_BUCKETS = 300
_DRAWS = 100
_BLOCK = 12
#: Points of the forecast cone between the last step seen and the plan's end.
CONE_POINTS = 40


@dataclass(frozen=True, slots=True)
class LossForecast:
    """The final loss's forecast from ``at_step``: quantiles, and what it knew of the rate.

    ``basis``: "schedule" (stated), "observed" (the rate seen, its future assumed) or "steps"
    (no rate known: a power law in steps).
    """

    at_step: int
    planned_total_steps: int
    p10: float
    p50: float
    p90: float
    basis: str
    law: LossLaw
    cone: Cone


@dataclass(frozen=True, slots=True)
class Cone:
    """The loss curve ahead (its mean, without the step-to-step noise): p10, p50 and p90 at
    ``step``, from the last step seen to the plan's last, for a chart to draw."""

    step: np.ndarray
    p10: np.ndarray
    p50: np.ndarray
    p90: np.ndarray

    def as_dict(self) -> dict[str, list[float]]:
        """Lists, for JSON."""
        return {k: getattr(self, k).tolist() for k in ("step", "p10", "p50", "p90")}


def forecast_final_loss(
    steps: np.ndarray,
    loss: np.ndarray,
    planned_total_steps: int,
    *,
    schedule: LrSchedule | None = None,
    lr: tuple[np.ndarray, np.ndarray] | None = None,
    rng: np.random.Generator | None = None,
) -> LossForecast | None:
    """The forecast from ``loss`` at ``steps`` (``lr``: the rate's (steps, values) seen), or
    None with fewer than ``MIN_STEPS`` finite steps seen or none left before the plan ends."""
    rng = rng or np.random.default_rng(0)
    seen_steps, seen_loss = _per_step(steps, loss)
    total = int(planned_total_steps)
    if len(seen_steps) < MIN_STEPS or total <= FINAL_WINDOW or seen_steps[-1] >= total - 1:
        return None
    paths, basis = _lr_paths(total, schedule, lr)
    x, y, noise = _buckets(seen_steps, seen_loss)
    fits = [_areas(path) for path in paths]
    s1, s2 = fits[0][0][x], fits[0][1][x]
    shapes = [(shape, weight, LossLaw.fit(s1, s2, y, shape=shape)) for shape, weight in
              _weighed_shapes(s1, s2, y)]  # fmt: skip
    window = _Window(total, seen_steps, seen_loss)
    ahead = np.unique(np.linspace(seen_steps[-1], total - 1, CONE_POINTS).astype(np.int64))
    finals: list[float] = []
    curves: list[np.ndarray] = []
    for shape, weight, fitted in shapes:
        residual = y - fitted.loss(s1, s2)
        for _ in range(max(1, round(_DRAWS * weight))):
            noisy = fitted.loss(s1, s2) + resample_blocks(residual, _BLOCK, rng)
            refit = LossLaw.fit(s1, s2, noisy, shape=shape)
            finals.extend(window.mean(refit, a1, a2) for a1, a2 in fits)
            curves.extend(refit.loss(a1[ahead], a2[ahead]) for a1, a2 in fits)
    spread = noise * np.sqrt(window.ahead) / FINAL_WINDOW  # of the mean of the steps to come
    draws = np.asarray(finals) + rng.normal(0.0, spread, len(finals))
    paths_ahead = np.asarray(curves)
    if np.all(seen_loss > 0):  # a loss never below 0 will not end there
        draws, paths_ahead = np.maximum(draws, 0.0), np.maximum(paths_ahead, 0.0)
    p10, p50, p90 = np.quantile(draws, [0.1, 0.5, 0.9]).tolist()
    cone = Cone(ahead, *np.quantile(paths_ahead, [0.1, 0.5, 0.9], axis=0))
    law = shapes[0][2]  # the best weighed
    return LossForecast(int(seen_steps[-1]), total, p10, p50, p90, basis, law, cone)


class _Window:
    """The final window's steps: those seen count as seen, the others as a law says."""

    def __init__(self, total: int, seen_steps: np.ndarray, seen_loss: np.ndarray) -> None:
        first = total - FINAL_WINDOW
        inside = seen_steps >= first
        self._seen_sum = float(seen_loss[inside].sum())
        self._ahead = np.setdiff1d(np.arange(first, total), seen_steps[inside])
        self.ahead = len(self._ahead)

    def mean(self, law: LossLaw, s1: np.ndarray, s2: np.ndarray) -> float:
        """The window's mean loss under ``law`` (areas ``s1``, ``s2`` of every planned step)."""
        ahead = law.loss(s1[self._ahead], s2[self._ahead]).sum() if self.ahead else 0.0
        return (self._seen_sum + float(ahead)) / FINAL_WINDOW


def _per_step(steps: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct steps in order, each with its mean finite loss."""
    s, v = np.asarray(steps, np.int64), np.asarray(loss, np.float64)
    keep = np.isfinite(v) & (s >= 0)
    uniq, inverse = np.unique(s[keep], return_inverse=True)
    sums = np.bincount(inverse, weights=v[keep], minlength=len(uniq))
    return uniq, sums / np.bincount(inverse, minlength=len(uniq))


def _lr_paths(
    total: int, schedule: LrSchedule | None, lr: tuple[np.ndarray, np.ndarray] | None
) -> tuple[list[np.ndarray], str]:
    """Per-step learning rates from step 0 to the plan's end: one path, or the two futures
    taken when only the rate seen so far is known."""
    every = np.arange(total)
    if schedule is not None:
        return [schedule.lr(every)], "schedule"
    if lr is None or not np.isfinite(np.asarray(lr[1], np.float64)).any():
        return [np.ones(total)], "steps"
    at, values = np.asarray(lr[0], np.int64), np.asarray(lr[1], np.float64)
    ok = np.isfinite(values) & (at >= 0)
    at, values = at[ok], values[ok]
    order = np.argsort(at, kind="stable")
    at, values = at[order], values[order]
    last = int(min(at[-1], total - 1))
    past = values[np.clip(np.searchsorted(at, every[: last + 1], side="right") - 1, 0, None)]
    rest = total - last - 1
    held = np.concatenate([past, np.full(rest, past[-1])])
    decayed = np.concatenate([past, past[-1] * (1.0 - np.arange(1, rest + 1) / (rest + 1))])
    return [held, decayed], "observed"


def _weighed_shapes(s1: np.ndarray, s2: np.ndarray, y: np.ndarray) -> list[tuple[Shape, float]]:
    """The law's shapes (with and without the annealing term; with the floor free, and at 0
    or above when every loss seen is), each weighed by how well its fit to the first two
    thirds of the points foretells the last third, best first."""
    floors = (False, True) if np.all(y > 0) else (False,)
    shapes = [Shape(annealing, floor) for annealing in (True, False) for floor in floors]
    cut = len(y) * 2 // 3
    errors = []
    for shape in shapes:
        early = LossLaw.fit(s1[:cut], s2[:cut], y[:cut], shape=shape)
        errors.append(float(np.mean((early.loss(s1[cut:], s2[cut:]) - y[cut:]) ** 2)))
    weight = 1.0 / np.maximum(np.asarray(errors), 1e-18) ** 2
    order = np.argsort(-weight, kind="stable")
    return [(shapes[i], float(weight[i] / weight.sum())) for i in order]


def _areas(path: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S1 and S2 of a path, S1 kept above 0 (a rate of 0 at the first steps of a warm-up)."""
    s1, s2 = lr_areas(path)
    floor = max(float(np.max(s1)) * 1e-9, 1e-12)
    return np.maximum(s1, floor), s2


def _buckets(steps: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
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
