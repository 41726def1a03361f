"""Subpackages reachable as attributes of their parent, imported on first use (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType

__all__ = ["lazy_submodules"]


def lazy_submodules(
    package: str, names: tuple[str, ...], namespace: Mapping[str, object]
) -> tuple[Callable[[str], ModuleType], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import ``names`` only when first used.

    So ``import stepwatch`` then ``stepwatch.torch.watch`` works without ``import
    stepwatch`` itself loading torch or a framework.
    """

    def getattr_(name: str) -> ModuleType:
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def dir_() -> list[str]:
        return sorted({*namespace, *names})

    return getattr_, dir_
