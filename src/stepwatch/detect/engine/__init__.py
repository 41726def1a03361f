"""The engine that runs rules over sample batches and log events, shared by the live path and
replay: detectors per series, the pending/firing/resolved lifecycle, deduplication."""

from ._engine import LOG_REPEAT_S, Alert, Engine
from ._lifecycle import AlertState, Lifecycle, Transition

__all__ = ["Alert", "AlertState", "Engine", "LOG_REPEAT_S", "Lifecycle", "Transition"]
