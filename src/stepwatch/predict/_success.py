"""Will the run make it: the chance it reaches its planned last step with a finite loss that
has not diverged, from the loss curve so far, the learning rate still to come, and the
failures it has had.

Two risks, taken as independent:

- the curve's: a loss that already diverged (non-finite, or its recent mean ``DIVERGED``
  times its best) has failed; otherwise a logistic of how far the loss has risen from its
  best, which way it is heading now and how much higher the rate will go (a run whose loss
  rises while the rate still climbs blows up when it climbs further). Its coefficients come
  from ``python bench/forecast.py --fit``, on trainings other than those the bench reports on;
- the hardware's: failures of the kinds that end runs (``FATAL_KINDS``) recur at the rate
  the run has seen them, each ending the run with chance ``FATAL_SHARE``, over the time left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DIVERGED",
    "FATAL_KINDS",
    "FATAL_SHARE",
    "CurveRisk",
    "success_probability",
]

#: A loss whose recent mean is this many times its best mean has diverged: runs are stopped
#: there (a training's guard, or the loss_divergence policy).
DIVERGED = 1.5
#: Alert kinds that end runs when they strike: hardware and process failures.
FATAL_KINDS = frozenset(
    {"node_down", "gpu_errors", "log_oom", "log_nccl", "log_gpu_error", "log_io_error"}
)
#: The chance one such failure ends the run (the rest are absorbed by restarts and retries).
FATAL_SHARE = 0.5
#: Steps in each mean the curve's features compare; the trend is read over twice as many.
_WINDOW = 50
#: Logit of failure = b0 + b_rise · rise + b_ahead · ahead + b_trend · trend, fitted by
#: ``python bench/forecast.py --runs 0 --pushed 100 --seed 1000 --fit`` (the bench reports on
#: fresh seeds).
_COEF = (-4.61, 5.45, 2.66, 6.08)


@dataclass(frozen=True, slots=True)
class CurveRisk:
    """What the curve says: ``rise`` (recent mean over the best mean, less 1), ``ahead`` (log
    of the highest rate to come over the rate now, 0 when it only falls), ``trend`` (the
    loss's relative change over its latest points, by least squares: rising now or falling)
    and ``diverged``."""

    rise: float
    ahead: float
    diverged: bool
    trend: float = 0.0

    @classmethod
    def of(cls, loss: np.ndarray, lr_now: float | None, lr_max_ahead: float | None) -> CurveRisk:
        """The features of ``loss`` (each step's, in order, as logged) and of the rate now and
        to come."""
        loss = np.asarray(loss, np.float64)
        if len(loss) and not np.isfinite(loss[-_WINDOW:]).all():
            return cls(np.inf, 0.0, True)
        finite = loss[np.isfinite(loss)]
        means = _window_means(finite)
        rise = float(means[-1] / means.min() - 1) if len(means) and means.min() > 0 else 0.0
        ahead = 0.0
        if lr_now and lr_max_ahead and lr_now > 0 and lr_max_ahead > lr_now:
            ahead = float(np.log(lr_max_ahead / lr_now))
        return cls(max(rise, 0.0), ahead, rise >= DIVERGED - 1, _trend(finite[-2 * _WINDOW :]))

    def features(self) -> np.ndarray:
        """The logistic's inputs, a constant first."""
        return np.array([1.0, min(self.rise, 1.0), self.ahead, self.trend])

    def failure(self, coef: Sequence[float] = _COEF) -> float:
        """The chance the curve fails before the end."""
        if self.diverged:
            return 1.0
        return float(1.0 / (1.0 + np.exp(-(self.features() @ np.asarray(coef)))))


def success_probability(
    risk: CurveRisk | None, alerts: Sequence[str], elapsed_s: float, remaining_s: float | None
) -> float:
    """The chance of reaching the plan's end: the curve's survival times the hardware's."""
    curve = 1.0 if risk is None else 1.0 - risk.failure()
    fatal = sum(kind in FATAL_KINDS for kind in alerts)
    if fatal and remaining_s and elapsed_s > 0:
        rate = fatal * FATAL_SHARE / elapsed_s
        curve *= float(np.exp(-rate * remaining_s))
    return curve


def _trend(loss: np.ndarray) -> float:
    """The least-squares line's change over these points, relative to their mean, within
    ±1 (0 for fewer than 3 points or a mean of 0)."""
    mean = float(loss.mean()) if len(loss) >= 3 else 0.0
    if mean == 0.0:
        return 0.0
    x = np.arange(len(loss), dtype=np.float64)
    slope = float(np.polyfit(x, loss, 1)[0])
    return float(np.clip(slope * len(loss) / abs(mean), -1.0, 1.0))


def _window_means(loss: np.ndarray) -> np.ndarray:
    """Means of consecutive ``_WINDOW``-step windows, the last one ending at the last step."""
    n = len(loss) // _WINDOW * _WINDOW
    if n == 0:
        return np.asarray([loss.mean()]) if len(loss) else np.empty(0)
    return loss[len(loss) - n :].reshape(-1, _WINDOW).mean(axis=1)
