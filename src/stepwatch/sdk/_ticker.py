"""A daemon thread that calls a function at a fixed rate, sooner when woken, once more on close."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .._periodic import Periodic

__all__ = ["Ticker"]

log = logging.getLogger("stepwatch.sdk")


class Ticker:
    """Calls ``fn`` every ``interval_s``, less its own duration: data waits at most one interval."""

    def __init__(
        self,
        fn: Callable[[], None],
        interval_s: float,
        *,
        name: str,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"flush interval must be > 0 seconds, got {interval_s}")
        self._fn, self._interval, self._monotonic = fn, interval_s, monotonic
        self._due = monotonic() + interval_s
        self._worker = Periodic(
            self._tick,
            interval_s,
            name=name,
            failed="stepwatch: background flush failed; will try again",
            log=log,
            next_in=lambda: self._due - self._monotonic(),
        )
        #: Call ``fn`` now rather than at the next tick (the worker's own: no call of its own,
        #: as it is on the training thread's path once the buffer fills).
        self.wake: Callable[[], None] = self._worker.wake

    def start(self) -> None:
        self._due = self._monotonic() + self._interval
        self._worker.start()

    def close(self) -> None:
        """Stop the thread, then call ``fn`` a last time on the caller's thread."""
        self._worker.stop()
        self._fn()

    def _tick(self) -> None:
        start = self._monotonic()
        try:
            self._fn()
        finally:
            if start >= self._due:
                # Start the next call early by this call's duration, so that what
                # arrives just after this swap is written within one interval.
                end = self._monotonic()
                self._due = max(end, start + self._interval - (end - start))
