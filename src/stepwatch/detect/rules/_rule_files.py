"""Where a live collector's rules come from: a base set (the built-in pack) plus rule files that
add rules or replace those of the same group and name, re-read when a file changes."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..detectors import DETECTORS
from ._rules import RuleSet, load_rules

__all__ = ["RuleFiles"]


class RuleFiles:
    """``base`` overlaid with ``paths`` (later files win); ``changed`` polls their stat.

    Args:
        paths: rule files, validated with ``load_rules``.
        base: the rules the files extend.
        detectors: detector constructors by rule ``type``.
    """

    def __init__(
        self,
        paths: Sequence[str | Path] = (),
        base: RuleSet | None = None,
        detectors: Mapping[str, Callable[..., Any]] = DETECTORS,
    ) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.base = base or RuleSet()
        self.detectors = detectors
        self._seen = self._stats()

    def _stats(self) -> tuple[tuple[int, int, int] | None, ...]:
        out: list[tuple[int, int, int] | None] = []
        for path in self.paths:
            try:
                st = os.stat(path)
            except OSError:
                out.append(None)
            else:
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(out)

    def changed(self) -> bool:
        """True once after any file was modified, replaced, created or removed."""
        now = self._stats()
        if now == self._seen:
            return False
        self._seen = now
        return True

    def load(self) -> RuleSet:
        """Validate every file and overlay them on the base (the last ``policies:`` section
        wins); raises RuleError at a mistake."""
        rules = {r.key: r for r in self.base.rules}
        policies = self.base.policies
        for path in self.paths:
            loaded = load_rules(path, self.detectors)
            for rule in loaded.rules:
                rules.pop(rule.key, None)
                rules[rule.key] = rule
            policies = loaded.policies or policies  # a later file's section replaces it
        return RuleSet(tuple(rules.values()), policies)
