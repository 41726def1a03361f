"""stepwatch: watch large-model training runs while they happen and keep them healthy."""

from .sdk import Run, finish, init, log

__version__ = "0.1.0"

__all__ = ["Run", "__version__", "finish", "init", "log"]
