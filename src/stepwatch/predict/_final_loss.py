"""Where the loss will land: the mean training loss over the last ``FINAL_WINDOW`` planned
steps, forecast from the steps seen so far with a p10–p90 interval.

The law of the learning rate's areas is fitted to the loss seen (in step buckets, the first
tenth of it left out: the early transient no law follows), and run forward along the learning
rate of the steps to come. Those are the stated schedule's; without one, the rate last seen
held or brought down to nothing by the end, both taken (a wider interval); without any rate
at all, a power law in steps. The interval is that of refits to the curve with its residuals
resampled in blocks (they run in stretches, not step by step), plus the noise of a mean over
the final window's steps still to come (those already seen count as they were).

A project whose finished runs share one law (``ProjectLaw``) lends it: the run then needs
only its own level from its points, not the law's curvature from the first part of a curve.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ._loss_law import LossLaw, Shape
from ._points import FINAL_WINDOW, areas, buckets, per_step
from ._project_law import ProjectLaw, later_half, shifted
from ._resample import resample_blocks
from ._schedule import LrSchedule

__all__ = ["FINAL_WINDOW", "Cone", "LossForecast", "forecast_final_loss", "planned_rates"]

#: The fewest distinct steps seen before a forecast is made.
MIN_STEPS = 20
_DRAWS = 100
#: The project's law is taken while its root-mean-square misfit to the later half of the run's
#: points is at most this many times that of the run's own law.
PRIOR_MISFIT = 1.5
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
    #: The finished runs whose law the forecast took (0: the run's own law).
    project_runs: int = 0


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
    prior: ProjectLaw | None = None,
    rng: np.random.Generator | None = None,
) -> LossForecast | None:
    """The forecast from ``loss`` at ``steps`` (``lr``: the rate's (steps, values) seen), or
    None with fewer than ``MIN_STEPS`` finite steps seen or none left before the plan ends.
    ``prior``: the law of the project's finished runs, taken when it fits this run's points
    nearly as well as the run's own law does (``PRIOR_MISFIT``)."""
    rng = rng or np.random.default_rng(0)
    seen_steps, seen_loss = per_step(steps, loss)
    total = int(planned_total_steps)
    if len(seen_steps) < MIN_STEPS or total <= FINAL_WINDOW or seen_steps[-1] >= total - 1:
        return None
    paths, basis = _lr_paths(total, schedule, lr)
    x, y, noise = buckets(seen_steps, seen_loss)
    ahead = np.unique(np.linspace(seen_steps[-1], total - 1, CONE_POINTS).astype(np.int64))
    seen = _Seen(paths, x, y, _Window(total, seen_steps, seen_loss))
    drawn = None if prior is None or basis == "steps" else seen.project_draws(prior, ahead, rng)
    finals, curves, law = drawn or seen.own_draws(ahead, rng)
    spread = noise * np.sqrt(seen.window.ahead) / FINAL_WINDOW  # of the mean of the steps to come
    draws = np.asarray(finals) + rng.normal(0.0, spread, len(finals))
    paths_ahead = np.asarray(curves)
    if np.all(seen_loss > 0):  # a loss never below 0 will not end there
        draws, paths_ahead = np.maximum(draws, 0.0), np.maximum(paths_ahead, 0.0)
    p10, p50, p90 = np.quantile(draws, [0.1, 0.5, 0.9]).tolist()
    cone = Cone(ahead, *np.quantile(paths_ahead, [0.1, 0.5, 0.9], axis=0))
    project_runs = prior.runs if drawn is not None and prior is not None else 0
    return LossForecast(int(seen_steps[-1]), total, p10, p50, p90, basis, law, cone, project_runs)


Draws = tuple[list[float], list[np.ndarray], LossLaw]


class _Seen:
    """The points seen (bucketed at ``x``, mean loss ``y``) and the rate's paths to the plan's
    end (each future's areas, ``fits``: S1 and S2 of every planned step), drawn from."""

    def __init__(
        self, paths: list[np.ndarray], x: np.ndarray, y: np.ndarray, window: _Window
    ) -> None:
        self.paths, self.x, self.y, self.window = paths, x, y, window
        self.fits = [areas(path) for path in paths]
        self.s1, self.s2 = self.fits[0][0][x], self.fits[0][1][x]

    def own_draws(self, ahead: np.ndarray, rng: np.random.Generator) -> Draws:
        """Final losses and curves of refits of the run's own law, its shapes weighed."""
        s1, s2, y = self.s1, self.s2, self.y
        shapes = [(shape, weight, LossLaw.fit(s1, s2, y, shape=shape)) for shape, weight in
                  _weighed_shapes(s1, s2, y)]  # fmt: skip
        finals: list[float] = []
        curves: list[np.ndarray] = []
        for shape, weight, fitted in shapes:
            residual = y - fitted.loss(s1, s2)
            for _ in range(max(1, round(_DRAWS * weight))):
                noisy = fitted.loss(s1, s2) + resample_blocks(residual, _BLOCK, rng)
                refit = LossLaw.fit(s1, s2, noisy, shape=shape)
                finals.extend(self.window.mean(refit, a1, a2) for a1, a2 in self.fits)
                curves.extend(refit.loss(a1[ahead], a2[ahead]) for a1, a2 in self.fits)
        return finals, curves, shapes[0][2]  # the best weighed

    def project_draws(
        self, prior: ProjectLaw, ahead: np.ndarray, rng: np.random.Generator
    ) -> Draws | None:
        """Final losses and curves of the project's law at the run's own level (that level's
        uncertainty by the bootstrap, the law's by its spread, growing to the plan's end); None
        where the law misfits the run's points."""
        fits = [areas(path, prior.momentum) for path in self.paths]
        s1, s2, y = fits[0][0][self.x], fits[0][1][self.x], self.y
        level = shifted(prior.law, s1, s2, y)
        late = later_half(len(y))
        misfit = float(np.mean((level.loss(s1, s2) - y)[late] ** 2))
        best = float(np.mean((LossLaw.fit(s1, s2, y).loss(s1, s2) - y)[late] ** 2))
        if misfit > PRIOR_MISFIT**2 * best:
            return None
        # the level's uncertainty: the mean of the points it was read from, resampled (the
        # earlier points' misfit to the law is no part of it)
        residual = (y - level.loss(s1, s2))[late]
        spread = prior.spread(self.window.at / self.window.total)
        reach = (ahead - ahead[0]) / max(1, ahead[-1] - ahead[0])  # 0 now, 1 at the plan's end
        finals: list[float] = []
        curves: list[np.ndarray] = []
        for _ in range(_DRAWS):
            moved = float(np.mean(resample_blocks(residual, _BLOCK, rng)))
            law = replace(level, l0=level.l0 + moved)
            off = rng.normal(0.0, spread)
            finals.extend(self.window.mean(law, a1, a2) * (1 + off) for a1, a2 in fits)
            curves.extend(law.loss(a1[ahead], a2[ahead]) * (1 + off * reach) for a1, a2 in fits)
        return finals, curves, level


class _Window:
    """The final window's steps: those seen count as seen, the others as a law says."""

    def __init__(self, total: int, seen_steps: np.ndarray, seen_loss: np.ndarray) -> None:
        first = total - FINAL_WINDOW
        self.at, self.total = int(seen_steps[-1]) + 1, total
        inside = seen_steps >= first
        self._seen_sum = float(seen_loss[inside].sum())
        self._ahead = np.setdiff1d(np.arange(first, total), seen_steps[inside])
        self.ahead = len(self._ahead)

    def mean(self, law: LossLaw, s1: np.ndarray, s2: np.ndarray) -> float:
        """The window's mean loss under ``law`` (areas ``s1``, ``s2`` of every planned step)."""
        ahead = law.loss(s1[self._ahead], s2[self._ahead]).sum() if self.ahead else 0.0
        return (self._seen_sum + float(ahead)) / FINAL_WINDOW


def planned_rates(
    total: int, schedule: LrSchedule | None, lr: tuple[np.ndarray, np.ndarray] | None
) -> np.ndarray | None:
    """Every planned step's learning rate as far as known (the rate last seen held after
    it), or None where no rate is known: a finished run's, for its project's law."""
    paths, basis = _lr_paths(total, schedule, lr)
    return None if basis == "steps" else paths[0]


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
