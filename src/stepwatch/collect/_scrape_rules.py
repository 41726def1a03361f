"""The kinds of row a mapping table holds: how exporter samples become our samples and events.

Each row selects one exporter metric (or a few), renames the labels it keeps
(``{"gpu": "gpu"}``, ``{"mountpoint": "path"}``) and drops the rest. Samples of a
row that land on the same kept labels are one series: a rate or a sum adds them
up, a gauge keeps the first (or adds them up with ``combine="sum"``). Across
rows, the first row to give a series wins, so a table lists the exact source
before its fallbacks (a reported total before the total derived from used + free).
``skip`` leaves out samples whose label fully matches a regex (``{"device": "lo"}``).
A row may keep state between scrapes in the ``memory`` dict it is handed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..model import Event
from ._host import busy_percent, counter_rate
from ._scrape_parse import Metrics, Point
from ._source import Reading, Sample

__all__ = [
    "BusyPercent",
    "CodeChanges",
    "CounterEvents",
    "Difference",
    "Emit",
    "Gauge",
    "LabelLookup",
    "Rate",
    "Rule",
    "Scrape",
    "Total",
]

#: Our labels of one series, sorted: (("gpu", "0"),).
LabelKey = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class Scrape:
    """One successful scrape: when it started (monotonic seconds) and what it held."""

    t: float
    metrics: Metrics


class Emit:
    """Collects what the rows produce from one scrape; the first row to give a series wins."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.reading = Reading()
        self._given: set[tuple[str, LabelKey]] = set()

    def sample(self, name: str, value: float, labels: LabelKey = ()) -> None:
        if (name, labels) not in self._given:
            self._given.add((name, labels))
            self.reading.samples.append(Sample(name, value, dict(labels)))

    def event(self, kind: str, text: str, labels: LabelKey, **data: Any) -> None:
        """An event labelled like its series; ``data`` repeats the labels, numbers as ints."""
        given = {k: int(v) if v.isdigit() else v for k, v in labels}
        self.reading.events.append(Event(self.now, kind, text, dict(labels), {**given, **data}))


class Rule(Protocol):
    """A row of a mapping table."""

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        """Read ``scrape``, emit samples and events; ``memory`` is this row's, kept between
        scrapes."""
        ...


def _groups(
    scrape: Scrape,
    metric: str,
    labels: Mapping[str, str],
    skip: Mapping[str, str],
) -> dict[LabelKey, list[Point]]:
    """The samples of ``metric`` grouped by their kept, renamed labels."""
    groups: dict[LabelKey, list[Point]] = {}
    for point in scrape.metrics.get(metric, ()):
        found = point[0]
        if any(re.fullmatch(rx, found.get(lbl, "")) for lbl, rx in skip.items()):
            continue
        key = tuple(
            sorted((ours, found[theirs]) for theirs, ours in labels.items() if theirs in found)
        )
        groups.setdefault(key, []).append(point)
    return groups


def _firsts(scrape: Scrape, metric: str, labels: Mapping[str, str]) -> dict[LabelKey, float]:
    return {key: points[0][1] for key, points in _groups(scrape, metric, labels, {}).items()}


@dataclass(frozen=True, slots=True)
class Gauge:
    """An exporter value taken as it is, times ``scale`` (MiB to bytes, ratio to %)."""

    metric: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    scale: float = 1.0
    skip: Mapping[str, str] = field(default_factory=dict)
    combine: Literal["first", "sum"] = "first"

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        for key, points in _groups(scrape, self.metric, self.labels, self.skip).items():
            value = sum(v for _, v in points) if self.combine == "sum" else points[0][1]
            emit.sample(self.name, value * self.scale, key)


@dataclass(frozen=True, slots=True)
class Rate:
    """A counter turned into a per-second rate between two scrapes (absent on the first,
    and on a scrape where any of its counters went backwards)."""

    metric: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    scale: float = 1.0
    skip: Mapping[str, str] = field(default_factory=dict)

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        for key, points in _groups(scrape, self.metric, self.labels, self.skip).items():
            counters = {tuple(sorted(found.items())): value for found, value in points}
            before = memory.get(key)
            memory[key] = (scrape.t, counters)
            if before is not None:
                rate = counter_rate(before[1], counters, scrape.t - before[0])
                if rate is not None:
                    emit.sample(self.name, rate * self.scale, key)


@dataclass(frozen=True, slots=True)
class Difference:
    """``minuend - subtrahend`` per series, where both are given (used = total - available)."""

    name: str
    minuend: str
    subtrahend: str
    labels: Mapping[str, str] = field(default_factory=dict)
    scale: float = 1.0

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        minus = _firsts(scrape, self.subtrahend, self.labels)
        for key, value in _firsts(scrape, self.minuend, self.labels).items():
            if key in minus:
                emit.sample(self.name, (value - minus[key]) * self.scale, key)


@dataclass(frozen=True, slots=True)
class Total:
    """The sum of ``parts`` (all required) and ``optional`` ones, per series."""

    name: str
    parts: tuple[str, ...]
    optional: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    scale: float = 1.0

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        required = [_firsts(scrape, metric, self.labels) for metric in self.parts]
        extra = [_firsts(scrape, metric, self.labels) for metric in self.optional]
        for key in set.intersection(*(set(values) for values in required)):
            value = sum(values[key] for values in required)
            value += sum(values[key] for values in extra if key in values)
            emit.sample(self.name, value * self.scale, key)


@dataclass(frozen=True, slots=True)
class BusyPercent:
    """Machine-wide and busiest-core CPU % from per-cpu, per-mode seconds counters."""

    metric: str
    name: str
    busiest: str
    idle_modes: frozenset[str] = frozenset({"idle", "iowait"})
    cpu_label: str = "cpu"
    mode_label: str = "mode"

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        cores: dict[str, tuple[float, float]] = {}
        for found, seconds in scrape.metrics.get(self.metric, ()):
            cpu = found.get(self.cpu_label, "")
            busy, total = cores.get(cpu, (0.0, 0.0))
            idle = found.get(self.mode_label) in self.idle_modes
            cores[cpu] = (busy if idle else busy + seconds, total + seconds)
        before = memory.get("cores", {})
        memory["cores"] = cores
        pct = busy_percent(before, cores)
        if pct is not None:
            emit.sample(self.name, pct[0])
            emit.sample(self.busiest, pct[1])


@dataclass(frozen=True, slots=True)
class CodeChanges:
    """A gauge holding the last error code (DCGM's XID): each new code is an event, and
    ``name`` counts the codes seen since this source started.

    A code already there at the first scrape counts too (it cannot be told apart from
    one that arrived just before). The same code twice in a row is one change: the
    exporter's gauge cannot show it.
    """

    metric: str
    name: str
    event: str
    labels: Mapping[str, str] = field(default_factory=dict)
    title: str = "code"
    meanings: Mapping[int, str] = field(default_factory=dict)
    data_key: str = "code"

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        for key, value in _firsts(scrape, self.metric, self.labels).items():
            last, count = memory.get(key, (0.0, 0))
            if value != last and value != 0 and math.isfinite(value):
                count += 1
                code = int(value)
                text = f"{self.title} {code}{_meaning(self.meanings, code)}{_on(key)}"
                emit.event(self.event, text, key, **{self.data_key: code})
            memory[key] = (value, count)
            emit.sample(self.name, float(count), key)


@dataclass(frozen=True, slots=True)
class CounterEvents:
    """A counter per error code (``xid`` label): each increase is an event with the code."""

    metric: str
    event: str
    code_label: str
    labels: Mapping[str, str] = field(default_factory=dict)
    title: str = "code"
    meanings: Mapping[int, str] = field(default_factory=dict)
    data_key: str = "code"

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        for key, points in _groups(scrape, self.metric, self.labels, {}).items():
            for found, value in points:
                code = found.get(self.code_label, "")
                before = memory.get((key, code), 0.0)
                memory[key, code] = value
                added = value - before if value >= before else value  # a restart counts anew
                if added > 0:
                    number = int(code) if code.isdigit() else code
                    meaning = _meaning(self.meanings, number)
                    text = f"{self.title} {code}{meaning}{_on(key)}, {added:g} time(s)"
                    data = {self.data_key: number, "count": added}
                    emit.event(self.event, text, key, **data)


def _meaning(meanings: Mapping[int, str], code: object) -> str:
    meaning = meanings.get(code) if isinstance(code, int) else None
    return f" ({meaning})" if meaning else ""


def _on(key: LabelKey) -> str:
    """ " on gpu 1" for an event's text."""
    return "".join(f" on {k} {v}" for k, v in key)


@dataclass(frozen=True, slots=True)
class LabelLookup:
    """Rewrites a label's value through an info metric, before the rows after it read it:
    ``nvidia_smi_gpu_info{uuid, index}`` turns every ``uuid`` label into the GPU index."""

    info: str
    label: str
    value_label: str

    def apply(self, scrape: Scrape, memory: dict[Any, Any], emit: Emit) -> None:
        table = {
            found[self.label]: found[self.value_label]
            for found, _ in scrape.metrics.get(self.info, ())
            if self.label in found and self.value_label in found
        }
        if not table:
            return
        for metric, points in scrape.metrics.items():
            if metric == self.info:
                continue
            for found, _ in points:
                value = found.get(self.label)
                if value in table:
                    found[self.label] = table[value]
