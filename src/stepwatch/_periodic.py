"""The collector's background jobs (retention, policy steps, checkpoints) share one shape: a
daemon thread that runs a job every so often until stopped, where a run that fails is logged
and the next one comes as planned."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Periodic"]


class Periodic:
    """Calls ``job`` every ``interval_s`` on a thread named ``name``; may start again after
    ``stop`` (one app, many lifespans). ``failed`` is logged, with the traceback, when a run
    of ``job`` raises."""

    def __init__(
        self,
        job: Callable[[], object],
        interval_s: float,
        *,
        name: str,
        failed: str,
        log: logging.Logger,
    ) -> None:
        self._job, self.interval_s = job, interval_s
        self._name, self._failed, self._log = name, failed, log
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        """Asked to stop: a long job ends early when it checks this between its steps."""
        return self._stopping.is_set()

    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the thread once the run under way, if any, is over."""
        if self._thread is None:
            return
        self._stopping.set()
        self._thread.join()
        self._thread = None

    def run_once(self) -> None:
        """One run of the job, a failure logged."""
        try:
            self._job()
        except Exception:
            self._log.exception(self._failed)

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self.run_once()
