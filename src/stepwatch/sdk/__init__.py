"""What training code imports: ``init``, ``log``, ``finish``, the ``Run`` with its step timer.

The hot path is stdlib only: ``log`` validates and appends the call to an in-memory
list; background threads build its columns, make them durable in the spool and ship them.
"""

from ._api import current_run, finish, init, log
from ._control import FAILED, OK, UNSUPPORTED, Command, CommandPoller, Controller, Outcome
from ._pipeline import DROPPED_SAMPLES, HEARTBEAT, Pipeline
from ._run import Run

__all__ = [
    "DROPPED_SAMPLES",
    "FAILED",
    "HEARTBEAT",
    "OK",
    "UNSUPPORTED",
    "Command",
    "CommandPoller",
    "Controller",
    "Outcome",
    "Pipeline",
    "Run",
    "current_run",
    "finish",
    "init",
    "log",
]
