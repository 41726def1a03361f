"""Turning what training code passes to ``log`` into float64, or a clear error naming the key."""

from __future__ import annotations

import operator

from ..model import MAX_INT64, NO_STEP

__all__ = ["as_float", "as_step"]

_HINT = "an int, a float, a numpy scalar or a one-element tensor/array"


def _single(value: object) -> bool:
    """Whether an array-like holds exactly one element (0-d, or numel()/size of 1)."""
    if getattr(value, "ndim", None) == 0:
        return True
    numel = getattr(value, "numel", None)
    if callable(numel):
        return bool(numel() == 1)
    return getattr(value, "size", None) == 1


def as_float(key: object, value: object) -> float:
    """The float64 to store for ``value`` (NaN and +-Inf kept); TypeError for anything else."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"value for {key!r} is too large for float64: {value}") from None
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (bool, str, bytes)) and _single(value):
        scalar = item()
        if type(scalar) in (float, int):
            return as_float(key, scalar)
    raise TypeError(f"value for {key!r} must be {_HINT}, got {_describe(value)}")


def _describe(value: object) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{type(value).__name__} of shape {tuple(shape)}"
    return type(value).__name__


def as_step(step: object) -> int:
    """The step column value: NO_STEP for None, else an integer from 0 to MAX_INT64."""
    if step is None:
        return NO_STEP
    if isinstance(step, bool):
        raise TypeError("step must be an int, got bool")
    try:
        index = operator.index(step)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"step must be an int, got {type(step).__name__}") from None
    if not 0 <= index <= MAX_INT64:
        raise ValueError(f"step must be from 0 to {MAX_INT64}, got {index}")
    return index
