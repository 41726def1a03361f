"""``rollback`` in the framework callbacks: the newest checkpoint of the run whose weights are
all finite (one written after the weights went bad is no state to go back to)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import torch

__all__ = ["NO_CHECKPOINT", "Found", "all_finite", "newest_good"]

T = TypeVar("T")

#: The answer when the run has not written a checkpoint yet.
NO_CHECKPOINT = "no checkpoint yet"


def all_finite(weights: Mapping[str, object]) -> bool:
    """Whether every floating-point tensor of a state dict is finite."""
    return all(
        bool(torch.isfinite(value).all())
        for value in weights.values()
        if isinstance(value, torch.Tensor) and value.is_floating_point()
    )


@dataclass(frozen=True, slots=True)
class Found(Generic[T]):
    """The checkpoint to restore, as read, and how many newer ones were bad."""

    path: Path
    loaded: T
    skipped: int

    def detail(self, step: int) -> str:
        bad = f"; skipped {self.skipped} newer with non-finite weights" if self.skipped else ""
        return f"rolled back to {self.path} (step {step}){bad}"


def newest_good(
    paths: Iterable[Path], read: Callable[[Path], T], weights: Callable[[T], Mapping[str, object]]
) -> Found[T] | str:
    """Read ``paths`` (newest first) until one's ``weights`` are all finite; the reason for
    the failure when none is."""
    skipped = 0
    for path in paths:
        loaded = read(path)
        if all_finite(weights(loaded)):
            return Found(path, loaded, skipped)
        skipped += 1
    if skipped:
        return f"no good checkpoint: the {skipped} written have non-finite weights"
    return NO_CHECKPOINT
