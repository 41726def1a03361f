"""Framework callbacks: ``stepwatch.integrations.huggingface``, ``.lightning`` and the like.

Each lives in its own module and imports its framework when first used (imported, or
reached as an attribute), so ``import stepwatch`` never pulls in transformers or Lightning.
"""

from .. import _lazy

__all__: list[str] = []

__getattr__, __dir__ = _lazy.lazy_submodules(
    __name__, ("huggingface", "lightning", "pytorch_lightning"), globals()
)
