"""Runs still open in this process, finished at interpreter exit (flush, bounded ship attempt)."""

from __future__ import annotations

import atexit
import sys
import time
from typing import Protocol

from ..model import RunStatus

__all__ = ["EXIT_TIMEOUT_S", "track", "untrack"]

#: How long interpreter exit may spend shipping, for all open runs together.
EXIT_TIMEOUT_S = 10.0


class _Finishable(Protocol):
    def finish(self, status: str = ..., *, timeout_s: float = ...) -> None: ...


_open: dict[int, _Finishable] = {}
_hooked = False


def track(run: _Finishable) -> None:
    """Remember an open run; the exit hook is installed on first use, not at import."""
    global _hooked
    _open[id(run)] = run
    if not _hooked:
        atexit.register(_finish_all)
        _hooked = True


def untrack(run: _Finishable) -> None:
    """Forget a finished run."""
    _open.pop(id(run), None)


def _finish_all() -> None:
    """Finish every open run: "failed" when the program died of an uncaught exception."""
    status = RunStatus.FAILED if getattr(sys, "last_value", None) else RunStatus.FINISHED
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    for run in list(_open.values()):
        run.finish(status, timeout_s=max(0.0, deadline - time.monotonic()))
