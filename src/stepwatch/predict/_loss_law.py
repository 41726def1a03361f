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

__all__ = ["ANNEALING_MOMENTUM", "LossLaw", "Shape", "lr_areas"]

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
    return s1, np.cumsum(_decayed_sum(drops, momentum))


def _decayed_sum(x: np.ndarray, momentum: float) -> np.ndarray:
    """m[i] = momentum · m[i-1] + x[i], in closed form over chunks short enough that
    momentum^-chunk stays finite and exact (a plan of millions of steps costs milliseconds)."""
    out = np.empty_like(x)
    if momentum <= 0.0:
        out[:] = x
        return out
    chunk = max(1, min(len(x), int(20.0 / -np.log(momentum)))) if momentum < 1 else len(x)
    carry = 0.0
    for start in range(0, len(x), chunk):
        part = x[start : start + chunk]
        k = np.arange(len(part), dtype=np.float64)
        grow = momentum**k
        out[start : start + len(part)] = grow * (carry * momentum + np.cumsum(part / grow))
        carry = float(out[start + len(part) - 1])
    return out


@dataclass(frozen=True, slots=True)
class Shape:
    """Which of the law's terms a fit may use: without ``annealing`` C is 0; with ``floor``
    L0 is kept at 0 or above (a loss that cannot go below 0, as cross-entropy cannot)."""

    annealing: bool = True
    floor: bool = False


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
        cls,
        s1: np.ndarray,
        s2: np.ndarray,
        loss: np.ndarray,
        weight: np.ndarray | None = None,
        shape: Shape | None = None,
    ) -> LossLaw:
        """The law of least (weighted) squares over these points, of ``shape`` (the whole law
        by default); S1 must be above 0."""
        shape = shape or Shape()
        s1, s2, y = (np.asarray(v, np.float64) for v in (s1, s2, loss))
        w = np.ones_like(y) if weight is None else np.sqrt(np.asarray(weight, np.float64))
        anneals = shape.annealing and bool(np.ptp(s2) > 1e-12 * max(1.0, float(np.max(np.abs(s2)))))
        log_s1 = np.log(s1)

        def solve(alpha: float) -> tuple[LossLaw, float]:
            power = np.exp(-alpha * log_s1)
            return _solve(power, s2 if anneals else None, y, w, alpha, shape.floor)

        coarse = min((solve(float(a)) for a in _ALPHAS), key=lambda got: got[1])
        step = _ALPHAS[1] / _ALPHAS[0]
        fine = np.geomspace(coarse[0].alpha / step, coarse[0].alpha * step, 9)
        return min([coarse, *(solve(float(a)) for a in fine)], key=lambda got: got[1])[0]


def _solve(
    power: np.ndarray,
    s2: np.ndarray | None,
    y: np.ndarray,
    w: np.ndarray,
    alpha: float,
    floor: bool,
) -> tuple[LossLaw, float]:
    """(L0, A, C) of least squares for one α, each held at 0 when it comes out below: A and C
    always, L0 with ``floor``."""
    columns: dict[str, np.ndarray] = {"l0": np.ones_like(y), "a": power}
    if s2 is not None:
        columns["c"] = -s2
    free = set() if floor else {"l0"}
    while True:
        x = np.column_stack(list(columns.values()))
        coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
        got = dict(zip(columns, coef.tolist(), strict=True))
        negative = [k for k in columns if got[k] < 0 and k not in free]
        if not negative:
            residual = (x @ coef - y) * w
            law = LossLaw(got.get("l0", 0.0), got.get("a", 0.0), alpha, got.get("c", 0.0))
            return law, float(residual @ residual)
        del columns[negative[0]]
