"""The moving-block bootstrap both forecasts draw their intervals from: a series resampled in
blocks of neighbours, since its errors run in stretches, not step by step."""

from __future__ import annotations

import numpy as np

__all__ = ["resample_blocks"]


def resample_blocks(values: np.ndarray, block: int, rng: np.random.Generator) -> np.ndarray:
    """``values`` to their length again, in blocks of ``block`` neighbours picked at random."""
    n = len(values)
    block = min(block, n)
    starts = rng.integers(0, n - block + 1, size=-(-n // block))
    return np.concatenate([values[i : i + block] for i in starts])[:n]
