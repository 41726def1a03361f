"""Query-string parsing shared by the query routes: label filters, quantiles, the points cap."""

from __future__ import annotations

import math
from typing import overload

from ..model import MAX_ABS_TS_S, canonical_name, is_timestamp
from ._errors import ApiError

__all__ = ["MAX_POINTS", "label_match", "metric_name", "points", "quantiles", "seconds"]

#: More buckets than any screen has pixels; larger requests are refused, not silently cut.
MAX_POINTS = 10_000


def label_match(run: str | None, labels: list[str] | None) -> dict[str, str] | None:
    """``run=R&label=node:n0&label=rank:3`` as the store's ``match`` mapping (None: no filter)."""
    match: dict[str, str] = {}
    if run is not None:
        match["run"] = run
    for item in labels or ():
        key, sep, value = item.partition(":")
        if not sep or not key:
            raise ApiError(400, f"label filter {item!r} must look like key:value")
        match[key] = value
    return match or None


@overload
def metric_name(name: str) -> str: ...
@overload
def metric_name(name: None) -> None: ...
def metric_name(name: str | None) -> str | None:
    """The vocabulary name for a query's ``name`` (``loss`` means ``train.loss``)."""
    if name is None:
        return None
    try:
        return canonical_name(name)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None


def points(n: int) -> int:
    """The number of buckets, within 1..MAX_POINTS."""
    if not 1 <= n <= MAX_POINTS:
        raise ApiError(400, f"points must be between 1 and {MAX_POINTS}, got {n}")
    return n


def quantiles(text: str) -> tuple[float, ...]:
    """``0.5,0.9,0.99`` as floats in [0, 1]."""
    out = []
    for part in text.split(","):
        try:
            q = float(part)
        except ValueError:
            raise ApiError(
                400, f"q must be comma-separated numbers in [0, 1], got {part!r}"
            ) from None
        if not (math.isfinite(q) and 0.0 <= q <= 1.0):
            raise ApiError(400, f"quantile {q} is outside [0, 1]")
        out.append(q)
    return tuple(out)


def seconds(name: str, t: float | None) -> float | None:
    """A time filter as given; 400, naming the parameter, for a non-finite one."""
    if t is not None and not math.isfinite(t):
        raise ApiError(400, f"{name} must be a finite number of seconds")
    return t


def time_range(start: float | None, end: float | None) -> None:
    """Refuse a range that ends before it starts, or is not within the times the store holds."""
    for name, t in (("start", start), ("end", end)):
        if t is not None and not is_timestamp(t):
            raise ApiError(
                400, f"{name} must be a finite number of seconds within ±{MAX_ABS_TS_S:g}"
            )
    if start is not None and end is not None and end < start:
        raise ApiError(400, f"end ({end}) is before start ({start})")
