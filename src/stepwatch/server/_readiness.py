"""What /readyz asks before it says ready: a list of checks that other parts of the collector
add to (the store open, the writer running, detection state restored...)."""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["ReadyCheck", "Readiness"]

log = logging.getLogger("stepwatch.server")

#: None when its part is ready, else the reason it is not (said by /readyz with a 503).
ReadyCheck = Callable[[], str | None]


class Readiness:
    """The checks of one collector, asked in the order they were added."""

    def __init__(self, *checks: ReadyCheck) -> None:
        self._checks = list(checks)

    def add(self, check: ReadyCheck) -> None:
        """One more condition of being ready (a part that restores state adds one)."""
        self._checks.append(check)

    def not_ready(self) -> str | None:
        """The first reason not to take traffic, or None: ready. A check that fails is a reason
        too (its error logged), so a broken part never passes for a ready one."""
        for check in self._checks:
            try:
                reason = check()
            except Exception as exc:
                log.exception("readiness check %r failed", check)
                reason = f"a readiness check failed ({type(exc).__name__})"
            if reason:
                return reason
        return None
