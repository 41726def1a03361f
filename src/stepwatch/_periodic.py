"""A step run every so often on a daemon thread until stopped (retention, policy steps,
checkpoints, notification routing, the SDK's flushes and command polls, the node agent's
reads, orphaned spools), where a run that fails is logged and the next one comes as planned."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

from ._worker import Worker

__all__ = ["Periodic"]


class Periodic(Worker):
    """Calls ``job`` every ``interval_s`` on a thread named ``name``, sooner when woken; may
    start again after ``stop``. ``failed`` is logged, with the traceback, when a run of ``job``
    raises.

    Args:
        at_start: run once as soon as the thread starts, before the first wait.
        at_stop: run once more on the thread after a stop is asked (what waits goes out).
        next_in: seconds until the next run, asked after each (default ``interval_s``;
            ``math.inf``: until woken or stopped).
    """

    def __init__(
        self,
        job: Callable[[], object],
        interval_s: float,
        *,
        name: str,
        failed: str,
        log: logging.Logger,
        at_start: bool = False,
        at_stop: bool = False,
        next_in: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(name=name, failed=failed, log=log)
        self._job, self.interval_s = job, interval_s
        self._at_start, self._at_stop = at_start, at_stop
        self._next_in = next_in or (lambda: self.interval_s)
        self._wake = threading.Event()

    def start(self) -> None:
        self._wake.clear()
        super().start()

    def wake(self) -> None:
        """Run now rather than at the next tick."""
        self._wake.set()

    def run_once(self) -> None:
        """One run of the job, a failure logged."""
        self.attempt(self._job)

    def _woken(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        if self._at_start:
            self.run_once()
        while not self._sleep(self._next_in()):
            self.run_once()
        if self._at_stop:
            self.run_once()

    def _sleep(self, seconds: float) -> bool:
        """Until the next run (or a wake); True when stopping."""
        self._wake.wait(None if math.isinf(seconds) else max(0.0, seconds))
        self._wake.clear()
        return self.stopping
