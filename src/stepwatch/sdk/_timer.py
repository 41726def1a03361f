"""The step timer: wall time of each optimizer step and of its data/compute/comm phases."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..model import canonical_name
from ._values import as_step

__all__ = ["StepTimer"]

STEP_TIME = "train.step_time_s"


class StepTimer:
    """Times ``step`` blocks and the ``phase`` blocks inside them, then records one sample each.

    Args:
        record: receives ``({metric: seconds}, step)`` when a step block ends normally.
        clock: a monotonic clock in seconds (default ``time.perf_counter``).
    """

    def __init__(
        self,
        record: Callable[[dict[str, float], int], None],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._record, self._clock = record, clock
        self._step: int | None = None
        self._phases: dict[str, float] = {}
        self._names: dict[str, str] = {}

    @contextmanager
    def step(self, step: int) -> Iterator[None]:
        """Time one optimizer step; nothing is recorded if the block raises."""
        if self._step is not None:
            raise RuntimeError(f"run.step({step}) inside run.step({self._step}): steps do not nest")
        self._step, self._phases = as_step(step), {}
        start = self._clock()
        try:
            yield
            elapsed = self._clock() - start
            current = self._step
        finally:
            self._step = None
        self._record({STEP_TIME: elapsed, **self._phases}, current)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the block's time to ``train.<name>_time_s`` of the current step."""
        if self._step is None:
            raise RuntimeError(f"run.phase({name!r}) must be used inside a run.step() block")
        metric = self._names.get(name)
        if metric is None:
            metric = self._names[name] = canonical_name(f"train.{name}_time_s")
        start = self._clock()
        try:
            yield
        finally:
            self._phases[metric] = self._phases.get(metric, 0.0) + (self._clock() - start)
