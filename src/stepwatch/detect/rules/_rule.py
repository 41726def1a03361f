"""What a validated rule is: the values the engine reads, apart from the YAML they are read from
(the rule file reader makes them, replay and the live detector run them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...act import Policies

__all__ = [
    "SEVERITIES",
    "Comparison",
    "Detectors",
    "LogMatch",
    "Rule",
    "RuleSet",
    "Signal",
    "across_members",
]

SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True, slots=True)
class LogMatch:
    """Log lines that match ``regex`` (if given), contain all of ``all`` and any of ``any``,
    and do not match ``exclude``: a tool's benign line can share words with its fatal one.
    ``query`` (canonical JSON) is a bool query in Elasticsearch's form that the line must
    match too: a saved search, read as the search API reads it."""

    regex: str | None = None
    all: tuple[str, ...] = ()
    any: tuple[str, ...] = ()
    exclude: str | None = None
    query: str | None = None


@dataclass(frozen=True, slots=True)
class Signal:
    """What a rule reads: the series of one or more metrics (matching ``match``: each label
    one of its values, ``""`` for a series without it) or log lines; ``by`` names the labels
    that make the alert's entity (run, node, gpu, rank). With
    ``divide_by`` the value is the metric over the latest value of that other metric of the
    same entity (memory used over total, bytes over seconds). With ``where`` only the samples
    whose own value (before dividing) meets that comparison are judged: a throughput means
    something only over a write big enough to be bound by bandwidth."""

    metrics: tuple[str, ...] = ()
    log: LogMatch | None = None
    match: tuple[tuple[str, tuple[str, ...]], ...] = ()
    by: tuple[str, ...] = ()
    divide_by: str | None = None
    where: Comparison | None = None


@dataclass(frozen=True, slots=True)
class Comparison:
    """``value OP level``, e.g. ``> 80``; ``& 0x60`` holds when any of those bits is set."""

    op: str
    level: float


@dataclass(frozen=True, slots=True)
class Rule:
    """One validated rule; equal rules compare equal, so a reload can keep their state."""

    group: str
    alert: str
    kind: str
    signal: Signal
    severity: str
    detector: str | None = None
    params: tuple[tuple[str, str | float | bool], ...] = ()
    threshold: Comparison | None = None
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    for_samples: int = 0
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    playbook: str = ""
    line: int = 0

    @property
    def key(self) -> tuple[str, str]:
        """Identity across reloads: group and alert name."""
        return (self.group, self.alert)


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules of one or more files, in file order, and their ``policies:`` section."""

    rules: tuple[Rule, ...] = field(default_factory=tuple)
    policies: Policies | None = None

    def __len__(self) -> int:
        return len(self.rules)


#: Detector constructors by rule ``type``; their keyword parameters are what a rule may set.
Detectors = Mapping[str, Callable[..., Any]]


def across_members(factory: Callable[..., Any]) -> bool:
    """Whether a detector compares the series of a rule with each other (peers, absence)."""
    return bool(getattr(factory, "across_members", False))
