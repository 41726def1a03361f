"""stepwatch: watch large-model training runs while they happen and keep them healthy."""

from . import _lazy
from .sdk import Run, finish, init, log

__version__ = "0.1.0"

__all__ = ["Run", "__version__", "finish", "init", "log"]

# ``stepwatch.torch`` and ``stepwatch.integrations`` import torch and their frameworks on first use.
__getattr__, __dir__ = _lazy.lazy_submodules(__name__, ("integrations", "torch"), globals())
