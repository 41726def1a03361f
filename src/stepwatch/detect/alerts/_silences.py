"""Silences and inhibition: what keeps a firing alert from reaching people.

A silence mutes alerts whose labels match its matchers for a time window
(set by a person, with an expiry); an inhibition mutes one kind of alert
while another kind fires for the same entity (a node that is down explains
its stragglers and its slow collectives).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..._regex import Regex, compile_regex

__all__ = [
    "DEFAULT_INHIBITIONS",
    "Inhibition",
    "Matcher",
    "RecentlyResolved",
    "Silence",
    "inhibited",
]


@dataclass(frozen=True, slots=True)
class Matcher:
    """``label = value``, ``label != value``, ``label =~ regex`` or ``label !~ regex``."""

    label: str
    value: str
    op: str = "="
    _regex: Regex | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.op not in ("=", "!=", "=~", "!~"):
            raise ValueError(f"matcher operator must be =, !=, =~ or !~, got {self.op!r}")
        if self.op in ("=~", "!~"):  # compiled once, by RE2: safe on any label value
            object.__setattr__(self, "_regex", compile_regex(self.value))

    @classmethod
    def parse(cls, text: str) -> Matcher:
        """``node=node3``, ``kind=~gpu_.*``; the longest operator that fits wins."""
        match = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$", text)
        if match is None:
            raise ValueError(f"expected LABEL=VALUE (or !=, =~, !~), got {text!r}")
        return cls(match.group(1), match.group(3).strip("\"'"), match.group(2))

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.label, "")
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        assert self._regex is not None
        found = self._regex.fullmatch(value) is not None
        return found if self.op == "=~" else not found


@dataclass(frozen=True, slots=True)
class Silence:
    """Mutes matching alerts from ``starts`` until ``ends`` (epoch seconds)."""

    matchers: tuple[Matcher, ...]
    starts: float
    ends: float
    created_by: str = ""
    comment: str = ""
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        if not self.matchers:
            raise ValueError("a silence needs at least one matcher")
        if self.ends <= self.starts:
            raise ValueError("a silence must end after it starts")

    def active(self, now: float) -> bool:
        return self.starts <= now < self.ends

    def mutes(self, labels: Mapping[str, str], now: float) -> bool:
        """True while active and every matcher matches (``kind`` is one of the labels)."""
        return self.active(now) and all(m.matches(labels) for m in self.matchers)


@dataclass(frozen=True, slots=True)
class Inhibition:
    """While a ``source`` kind fires, and for ``after_s`` once it resolved, ``targets`` kinds
    with the same ``equal`` labels are muted."""

    source: str
    targets: frozenset[str]
    equal: tuple[str, ...]
    after_s: float = 0.0


_WAITING = frozenset({"gpu_underutilized", "step_time_regression"})
#: The waiting symptoms are judged over up to ten minutes (idle GPUs over 10 minutes, slower
#: steps for 10 minutes): that long after their cause ends, their window still holds its effect.
WAITING_S = 600.0

#: A node that is down explains its stragglers, slow collectives and idle GPUs, and the silence
#: of each of its producers (a telemetry_gap seen on the way down). In synchronous
#: training every rank waits for the slowest one, so a straggler, a starved data loader or a
#: node's slow network explains the idle GPUs and the slower steps of the whole run, and goes
#: on explaining them while their windows still hold its time. A fault that fires makes its
#: forecast moot: the forecast said it would come, and now it is here.
DEFAULT_INHIBITIONS = (
    Inhibition("node_down", _WAITING | {"straggler", "sync_latency", "telemetry_gap"}, ("node",)),
    Inhibition("straggler", _WAITING | {"sync_latency"}, ("run",), WAITING_S),
    Inhibition("dataloader_bottleneck", _WAITING | {"sync_latency"}, ("run",), WAITING_S),
    Inhibition("sync_latency", _WAITING, ("run",), WAITING_S),
    Inhibition("gpu_memory_pressure", frozenset({"forecast_oom"}), ("run", "node", "gpu")),
    Inhibition("gpu_thermal", frozenset({"forecast_thermal"}), ("run", "node", "gpu")),
    Inhibition("host_memory_leak", frozenset({"forecast_host_oom"}), ("run", "node")),
    Inhibition("disk_full", frozenset({"forecast_disk_full"}), ("run", "node")),
)


def inhibited(
    kind: str,
    labels: Mapping[str, str],
    firing: Iterable[tuple[str, Mapping[str, str]]],
    rules: Sequence[Inhibition] = DEFAULT_INHIBITIONS,
    resolved: Iterable[tuple[str, Mapping[str, str], float]] = (),
    at: float = 0.0,
) -> bool:
    """Whether an alert (``kind``, ``labels``) beginning at data time ``at`` is muted by one of
    the ``firing`` alerts, or by one ``resolved`` (kind, labels, when) within its rule's
    ``after_s``."""
    relevant = [r for r in rules if kind in r.targets]
    if not relevant:
        return False
    sources = [(k, source, 0.0) for k, source in firing]
    sources += [(k, source, at - when) for k, source, when in resolved]
    for source_kind, source_labels, ago in sources:
        for rule in relevant:
            if (
                source_kind == rule.source
                and ago <= rule.after_s
                and all(k in labels and labels.get(k) == source_labels.get(k) for k in rule.equal)
            ):
                return True
    return False


@dataclass
class RecentlyResolved:
    """The alerts resolved less than the longest ``after_s`` of the inhibitions ago, for
    ``inhibited(resolved=...)``: bounded by that span of data time."""

    rules: Sequence[Inhibition] = DEFAULT_INHIBITIONS
    entries: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def add(self, kind: str, labels: Mapping[str, str], ts: float) -> None:
        if any(r.source == kind and r.after_s > 0 for r in self.rules):
            self.entries[(kind, tuple(sorted(labels.items())))] = ts

    def discard(self, kind: str, labels: Mapping[str, str]) -> None:
        """Firing again: it is a source by firing now."""
        self.entries.pop((kind, tuple(sorted(labels.items()))), None)

    def at(self, ts: float) -> list[tuple[str, dict[str, str], float]]:
        span = max((r.after_s for r in self.rules), default=0.0)
        self.entries = {k: when for k, when in self.entries.items() if ts - when <= span}
        return [(kind, dict(labels), when) for (kind, labels), when in self.entries.items()]
