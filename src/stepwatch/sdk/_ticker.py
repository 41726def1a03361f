"""A daemon thread that calls a function at a fixed rate, sooner when woken, once more on close."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

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
        self._event = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Call ``fn`` now rather than at the next tick."""
        self._event.set()

    def close(self) -> None:
        """Stop the thread, then call ``fn`` a last time on the caller's thread."""
        self._closing = True
        self._event.set()
        if self._thread.is_alive():
            self._thread.join()
        self._fn()

    def _loop(self) -> None:
        due = self._monotonic() + self._interval
        while True:
            self._event.wait(max(0.0, due - self._monotonic()))
            self._event.clear()
            if self._closing:
                return
            start = self._monotonic()
            try:
                self._fn()
            except Exception:
                log.exception("stepwatch: background flush failed; will try again")
            if start >= due:
                # Start the next call early by this call's duration, so that what
                # arrives just after this swap is written within one interval.
                end = self._monotonic()
                due = max(end, start + self._interval - (end - start))
