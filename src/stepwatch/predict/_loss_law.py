"""The loss curve as a law of the learning rate's areas (Tissue et al. 2024, "Scaling Law with
Learning Rate Annealing"): L(s) = L0 + A·S1(s)^−α − C·S2(s), where S1 is the area under the
learning rate up to step s (how far training has gone) and S2 the annealing area (how much
the rate has come down, with momentum λ). Unlike a power law in steps, it predicts the drop a
cosine or WSD decay brings, from the part of the curve before the decay.

For a fixed α the law is linear in (L0, A, C), so a fit is a least-squares solve per α on a
grid: no optimiser to start well, and a fit costs the same for every run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ANNEALING_MOMENTUM", "LossLaw", "lr_areas"]

#: λ of the annealing area: how long a drop of the rate keeps lowering the loss.
ANNEALING_MOMENTUM = 0.999
#: The exponents tried for α, then a finer grid about the best of them.
_ALPHAS = np.geomspace(0.02, 3.0, 20)


def lr_areas(lr: np.ndarray, momentum: float = ANNEALING_MOMENTUM) -> tuple[np.ndarray, np.ndarray]:
    """S1 and S2 after each step of a per-step learning-rate path (``lr[i]``: step i's rate).

    S1 is the running sum of the rate; S2 the running sum of m, where m takes each drop of
    the rate and decays by ``momentum`` a step. A rise (warm-up, a re-warm) is no drop: it
    would make S2 negative for as long as the run lasts and the law reads it as a loss rise.
    """
    lr = np.asarray(lr, np.float64)
    s1 = np.cumsum(lr)
    drops = np.maximum(-np.diff(lr, prepend=lr[:1]), 0.0)
    m = np.empty_like(drops)
    acc = 0.0
    for i, d in enumerate(drops.tolist()):  # a recurrence: linear in the steps, once per fit
        acc = momentum * acc + d
        m[i] = acc
    return s1, np.cumsum(m)


@dataclass(frozen=True, slots=True)
class LossLaw:
    """A fitted law: L0 + A·S1^−α − C·S2 (A and C never negative)."""

    l0: float
    a: float
    alpha: float
    c: float

    def loss(self, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
        """The loss the law gives at these areas."""
        return self.l0 + self.a * np.power(np.maximum(s1, 1e-12), -self.alpha) - self.c * s2

    @classmethod
    def fit(
        cls, s1: np.ndarray, s2: np.ndarray, loss: np.ndarray, weight: np.ndarray | None = None
    ) -> LossLaw:
        """The law of least (weighted) squares over these points; S1 must be above 0."""
        s1, s2, y = (np.asarray(v, np.float64) for v in (s1, s2, loss))
        w = np.ones_like(y) if weight is None else np.sqrt(np.asarray(weight, np.float64))
        anneals = bool(np.ptp(s2) > 1e-12 * max(1.0, float(np.max(np.abs(s2)))))
        log_s1 = np.log(s1)

        def solve(alpha: float) -> tuple[LossLaw, float]:
            return _solve(np.exp(-alpha * log_s1), s2 if anneals else None, y, w, alpha)

        coarse = min((solve(float(a)) for a in _ALPHAS), key=lambda got: got[1])
        step = _ALPHAS[1] / _ALPHAS[0]
        fine = np.geomspace(coarse[0].alpha / step, coarse[0].alpha * step, 9)
        return min([coarse, *(solve(float(a)) for a in fine)], key=lambda got: got[1])[0]


def _solve(
    power: np.ndarray, s2: np.ndarray | None, y: np.ndarray, w: np.ndarray, alpha: float
) -> tuple[LossLaw, float]:
    """(L0, A, C) of least squares for one α, with A and C held at 0 when they come out below."""
    columns: dict[str, np.ndarray] = {"a": power} if s2 is None else {"a": power, "c": -s2}
    while True:
        used = list(columns)
        x = np.column_stack([np.ones_like(y), *columns.values()])
        coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
        got = dict(zip(used, coef[1:].tolist(), strict=True))
        negative = [k for k in used if got[k] < 0]
        if not negative:
            residual = (x @ coef - y) * w
            law = LossLaw(float(coef[0]), got.get("a", 0.0), alpha, got.get("c", 0.0))
            return law, float(residual @ residual)
        del columns[negative[0]]
