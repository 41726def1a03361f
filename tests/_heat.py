"""A GPU's temperature wandering as heat does, for the thermal forecast's tests."""

from __future__ import annotations

import numpy as np


def heat_wander(size: int, seed: int) -> np.ndarray:
    """``size`` readings' wander by a degree or two: each keeps 0.9 of the last one's, plus a
    shock of 0.6 °C (an AR(1) from 0)."""
    shocks = np.random.default_rng(seed).normal(0.0, 0.6, max(size - 1, 0))
    wander = np.zeros(size)
    for i in range(1, size):
        wander[i] = 0.9 * wander[i - 1] + shocks[i - 1]
    return wander
