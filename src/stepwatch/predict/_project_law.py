"""The loss law of a project's finished runs, fitted on them together. Runs of one model on
one dataset follow one law of their rates' areas, whatever their schedule or length (the
premise of Tissue et al.), so a new run needs only its own level from its data; alone, it
would have to find the law's curvature from the first part of one curve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ._loss_law import LossLaw
from ._points import FINAL_WINDOW, areas, buckets, per_step

__all__ = ["FinishedCurve", "ProjectLaw", "fit_project_law", "later_half", "shifted"]

#: Where each finished run is cut to measure how far the law's forecasts land from its end
#: (shares of its planned steps).
SPREAD_CUTS = (0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
#: The annealing momenta tried (λ of the rate's annealing area).
MOMENTA = (0.99, 0.995, 0.998, 0.999)
#: The exponents tried for α.
_ALPHAS = np.geomspace(0.02, 3.0, 40)
#: The least relative spread said of a law: its runs are few, and the next may differ more.
MIN_SPREAD = 0.005


@dataclass(frozen=True, slots=True)
class FinishedCurve:
    """A run that reached its planned last step: every step's learning rate (``rates[i]``,
    step i's) and the loss at ``steps``."""

    rates: np.ndarray
    steps: np.ndarray
    loss: np.ndarray


@dataclass(frozen=True, slots=True)
class ProjectLaw:
    """The law fitted on ``runs`` finished runs (its annealing area of ``momentum``), and
    ``spreads``: at each of ``SPREAD_CUTS``, the root mean square of the relative errors of its
    final-loss forecasts, each run's made from that share of it by a law fitted on the
    other runs."""

    law: LossLaw
    momentum: float
    runs: int
    spreads: tuple[float, ...]

    def as_dict(self) -> dict[str, float]:
        """Its numbers, for JSON."""
        return {**asdict(self.law), "momentum": self.momentum, "runs": self.runs,
                "spreads": list(self.spreads)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProjectLaw:
        law = LossLaw(*(float(data[k]) for k in ("l0", "a", "alpha", "c")))
        spreads = tuple(float(v) for v in data["spreads"])
        return cls(law, float(data["momentum"]), int(data["runs"]), spreads)

    def spread(self, share: float) -> float:
        """The relative spread of a forecast from ``share`` of a run's planned steps."""
        return float(np.interp(share, SPREAD_CUTS, self.spreads))


def later_half(points: int) -> slice:
    """Where a run's own level is read: the later half of its points, its early transient over."""
    return slice(points // 2, None)


def shifted(law: LossLaw, s1: np.ndarray, s2: np.ndarray, loss: np.ndarray) -> LossLaw:
    """``law`` moved up or down to the level of the later half of ``loss`` (at these areas):
    a run's own level."""
    late = later_half(len(loss))
    off = float(np.mean(loss[late] - law.loss(s1[late], s2[late])))
    return LossLaw(law.l0 + off, law.a, law.alpha, law.c)


@dataclass(frozen=True, slots=True)
class _Points:
    """One finished run: its bucketed loss at its areas (what the law is fitted on), every
    step's loss seen and areas, and its final loss."""

    s1: np.ndarray
    s2: np.ndarray
    loss: np.ndarray
    steps: np.ndarray
    every_loss: np.ndarray
    every_s1: np.ndarray
    every_s2: np.ndarray
    final: float

    @classmethod
    def of(cls, curve: FinishedCurve, momentum: float) -> _Points | None:
        steps, loss = per_step(curve.steps, curve.loss)
        total = len(curve.rates)
        if len(steps) < 2 * FINAL_WINDOW or steps[-1] < total - 1:
            return None
        every_s1, every_s2 = areas(np.asarray(curve.rates, np.float64), momentum)
        x, y, _ = buckets(steps, loss)
        final = float(loss[steps >= total - FINAL_WINDOW].mean())
        return cls(every_s1[x], every_s2[x], y, steps, loss, every_s1, every_s2, final)

    def errors(self, law: LossLaw) -> list[float]:
        """The relative errors of ``law``'s forecasts of this run's final loss from each of
        ``SPREAD_CUTS``: shifted to the run's level in the points a forecast from there sees."""
        out = []
        for share in SPREAD_CUTS:
            seen = self.steps < len(self.every_s1) * share
            if seen.sum() < 2:
                out.append(math.nan)
                continue
            x, y, _ = buckets(self.steps[seen], self.every_loss[seen])
            own = shifted(law, self.every_s1[x], self.every_s2[x], y)
            end = slice(len(self.every_s1) - FINAL_WINDOW, None)
            out.append(own.loss(self.every_s1[end], self.every_s2[end]).mean() / self.final - 1)
        return out


def fit_project_law(curves: Sequence[FinishedCurve]) -> ProjectLaw | None:
    """The law of these finished runs together, or None with fewer than two of them usable
    (at least ``2 × FINAL_WINDOW`` steps seen, up to the last planned). The annealing
    momentum is the one of ``MOMENTA`` whose laws, each fitted without one run, best foretold
    that run's end: how long a drop of the rate keeps paying differs between optimisers."""
    best: tuple[float, ProjectLaw] | None = None
    for momentum in MOMENTA:
        points = [p for p in (_Points.of(c, momentum) for c in curves) if p is not None]
        if len(points) < 2:
            return None
        errors = np.array([p.errors(_fit([q for q in points if q is not p])) for p in points])
        rms = np.sqrt(np.nanmean(np.square(errors), axis=0))  # a spread per cut
        spreads = tuple(max(float(v), MIN_SPREAD) if np.isfinite(v) else 1.0 for v in rms)
        score = float(np.nanmean(np.square(errors)))
        if best is None or score < best[0]:
            best = (score, ProjectLaw(_fit(points), momentum, len(points), spreads))
    return None if best is None else best[1]


def _fit(points: Sequence[_Points]) -> LossLaw:
    """The law of least squares over every run's points, each run at a level of its own (seeds
    and data order move a run's loss up or down as a whole); L0 is the runs' mean level.

    The levels are taken out by centring each run's points on their means, which leaves two
    columns to solve per α."""
    s1, s2, loss = (np.concatenate([getattr(p, k) for p in points]) for k in ("s1", "s2", "loss"))
    run = np.repeat(np.arange(len(points)), [len(p.loss) for p in points])
    counts = np.bincount(run)

    def centred(v: np.ndarray) -> np.ndarray:
        return v - (np.bincount(run, weights=v) / counts)[run]

    y, anneal = centred(loss), centred(-s2)
    best: tuple[float, LossLaw] | None = None
    for alpha in _ALPHAS:
        power = np.power(s1, -alpha)
        for x in (np.column_stack([centred(power), anneal]), centred(power)[:, None]):
            coef, *_ = np.linalg.lstsq(x, y, rcond=None)
            if np.any(coef < 0):
                continue
            residual = x @ coef - y
            sse = float(residual @ residual)
            if best is None or sse < best[0]:
                a, c = float(coef[0]), float(coef[1]) if len(coef) == 2 else 0.0
                levels = np.bincount(run, weights=loss - a * power + c * s2) / counts
                best = (sse, LossLaw(float(levels.mean()), a, float(alpha), c))
    if best is None:  # the loss rises with the rate's area: no law of these runs
        return LossLaw(float(loss.mean()), 0.0, 1.0, 0.0)
    return best[1]
