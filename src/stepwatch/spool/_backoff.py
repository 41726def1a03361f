"""Exponential backoff with jitter, so many senders retrying a sick collector do not stampede it."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(slots=True)
class Backoff:
    """Delays that double from ``base_s`` up to ``cap_s``, each drawn from its upper half."""

    base_s: float = 0.1
    cap_s: float = 10.0
    rng: Callable[[], float] = random.random
    _attempt: int = field(default=0, init=False)

    def next(self) -> float:
        """The delay before the next try."""
        ceiling = min(self.cap_s, self.base_s * (2 ** min(self._attempt, 60)))
        self._attempt += 1
        return ceiling / 2 + self.rng() * ceiling / 2

    def reset(self) -> None:
        """Start again from ``base_s`` after a success."""
        self._attempt = 0
