"""The live path's two engines: rules reading one series at a time judge each batch as soon as
it is committed; rules comparing the members of a run judge it through the reorder buffer, so
they see every member in one time order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...model import SeriesKey
from ..engine import Engine
from ..rules import RuleSet, across_members

__all__ = ["Engines"]


def _split(rules: RuleSet, detectors: Mapping[str, Callable[..., Any]]) -> tuple[RuleSet, RuleSet]:
    """Rules reading one series at a time, and rules comparing members (they need time order)."""
    across = [
        r for r in rules.rules if r.detector is not None and across_members(detectors[r.detector])
    ]
    return RuleSet(tuple(r for r in rules.rules if r not in across)), RuleSet(tuple(across))


def _names(across: RuleSet) -> frozenset[str]:
    """The metrics the member-comparing rules read (the reorder buffer holds only those)."""
    return frozenset(n for r in across.rules for n in (*r.signal.metrics, r.signal.divide_by) if n)


class Engines:
    """The rules split by how they read: ``now`` (per series) and ``ordered`` (across members)."""

    def __init__(self, rules: RuleSet, detectors: Mapping[str, Callable[..., Any]]) -> None:
        self._detectors = detectors
        per_series, across = _split(rules, detectors)
        self.now = Engine(per_series, detectors)
        self.ordered = Engine(across, detectors)
        self._ordered_names = _names(across)

    def wanted(self, key: SeriesKey) -> bool:
        """Whether the member-comparing rules read this series."""
        return key.name in self._ordered_names

    def reload(self, rules: RuleSet) -> set[tuple[str, str]]:
        """Run ``rules`` from now on (see ``Engine.reload``); the keys of the rules whose state
        was dropped."""
        per_series, across = _split(rules, self._detectors)
        dropped = self.now.reload(per_series) | self.ordered.reload(across)
        self._ordered_names = _names(across)
        return dropped

    def firing(self, kind: str, labels: Mapping[str, str]) -> bool:
        """Whether a rule of either engine holds an alert of this kind and entity firing."""
        return self.now.firing(kind, labels) or self.ordered.firing(kind, labels)

    def forget_run(self, run: str) -> None:
        self.now.forget_run(run)
        self.ordered.forget_run(run)

    def warming_up(self) -> list[dict[str, Any]]:
        """The rules and entities still gathering their baseline, and how far they are."""
        found = self.now.warming_up() + self.ordered.warming_up()
        rows = [
            {
                "group": rule.group,
                "rule": rule.alert,
                "kind": rule.kind,
                "labels": labels,
                "seen": w.seen,
                "needed": w.needed,
                "unit": w.unit,
                "text": w.text(),
            }
            for rule, labels, w in found
        ]
        return sorted(rows, key=lambda r: (r["group"], r["rule"], sorted(r["labels"].items())))
