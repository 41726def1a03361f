"""The rule engine: routes each batch's series to the rules that read them, runs their
detectors and lifecycles in data time, and says which alerts changed state.

The same engine serves a live collector and a replay: it only ever sees
batches (column arrays plus log events) and never looks at a clock.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...model import NO_STEP, Event, SampleBatch, SeriesKey
from ..detectors import DETECTORS, PRODUCER, Absence, AbsenceFinding, Detector, Warmup, producer
from ..rules import Comparison, Rule, RuleSet, across_members
from ._alert import Alert, _alert, _entity
from ._dedup import Dedup
from ._lifecycle import AlertState, Lifecycle, Transition
from ._log_rules import LOG_REPEAT_S, LogRule

__all__ = ["LOG_REPEAT_S", "Alert", "Engine"]

#: Clock skew tolerated between a sample and its divisor (``divide_by``), in seconds.
SKEW_S = 1.0

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
    "==": operator.eq, "!=": operator.ne,
    "&": lambda value, bits: (np.nan_to_num(value).astype(np.int64) & int(bits)) != 0,
}  # fmt: skip


def _where(rule: Rule, value: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The rows whose own value meets the signal's ``where`` (all of them without one)."""
    where = rule.signal.where
    if where is None:
        return rows
    with np.errstate(invalid="ignore"):
        return rows[np.asarray(_OPS[where.op](value, where.level)) & np.isfinite(value)]


def _same(a: Rule, b: Rule) -> bool:
    """Equal definitions: where a rule sits in its file does not change what it does."""
    return dataclasses.replace(a, line=0) == dataclasses.replace(b, line=0)


class _AsOf:
    """The values of a rule's divisor for one entity: each sample is divided by the divisor's
    latest value at or before its own time, give or take ``SKEW_S`` (two samples written
    together may carry timestamps a little apart)."""

    def __init__(self) -> None:
        self.ts, self.value = np.empty(0), np.empty(0)

    def add(self, ts: np.ndarray, value: np.ndarray) -> None:
        all_ts = np.concatenate((self.ts, ts))
        order = np.argsort(all_ts, kind="stable")
        self.ts, self.value = all_ts[order], np.concatenate((self.value, value))[order]

    def divide(self, ts: np.ndarray, value: np.ndarray) -> np.ndarray:
        if not self.ts.size:
            return np.full(ts.shape[0], np.nan)
        at = np.searchsorted(self.ts, ts + SKEW_S, side="right") - 1
        divisor = np.where(at >= 0, self.value[np.maximum(at, 0)], np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(value / divisor, dtype=np.float64)

    def keep_last(self) -> None:
        """Between batches only the latest value matters."""
        self.ts, self.value = self.ts[-1:], self.value[-1:]


@dataclass(slots=True)
class _Binding:
    """One rule reading one series: its detector (if any) and its alert's lifecycle."""

    rule: Rule
    entity: dict[str, str]
    detector: Detector | None
    lifecycle: Lifecycle
    divisor: _AsOf | None = None

    def active(
        self, ts: np.ndarray, value: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Which samples meet the rule, what each was judged against and when a forecast
        expects its target (each None when the rule has none)."""
        if self.detector is not None:
            verdict = self.detector.update(ts, value)
            judged = getattr(verdict, "baseline", None)
            return verdict.anomalous, judged, getattr(verdict, "predicted_ts", None)
        threshold = self.rule.threshold
        assert isinstance(threshold, Comparison)
        with np.errstate(invalid="ignore"):
            met = np.asarray(_OPS[threshold.op](value, threshold.level)) & np.isfinite(value)
        return met, np.full(ts.shape[0], threshold.level), None


@dataclass(slots=True)
class _Group:
    """A rule whose detector compares members with each other: the values of the last ``by``
    label within a scope of the run and the other ``by`` labels (the ranks of a run, the nodes
    of a run, the GPUs of one node: a GPU is judged against its own node's)."""

    rule: Rule
    scope: dict[str, str]
    detector: Any
    members: dict[str, int] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)  # by member index
    lives: dict[int, Lifecycle] = field(default_factory=dict)
    parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)  # ts step value member source
    sources: dict[tuple[int, str], int] = field(default_factory=dict)  # (member, producer) -> index

    def member(self, name: str) -> int:
        """The index of a member, named by its value of the rule's last ``by`` label."""
        if name not in self.members:
            self.members[name] = len(self.names)
            self.names.append(name)
        return self.members[name]

    def source(self, member: int, producer: str) -> int:
        """The index of one producer of a member (its agent, a rank's process)."""
        return self.sources.setdefault((member, producer), len(self.sources))

    def entity(self, member: int) -> dict[str, str]:
        return {**self.scope, self.rule.signal.by[-1]: self.names[member]}

    def flush(self) -> list[Alert]:
        """Feed this batch's samples of every member, in time order, to the detector."""
        parts, self.parts = self.parts, []
        ts, step, value, member, source = (np.concatenate(c) for c in zip(*parts, strict=True))
        order = np.argsort(ts, kind="stable")
        if isinstance(self.detector, Absence):  # a training metric's silence alone says nothing
            clocked = step[order] == NO_STEP
            found = self.detector.update(ts[order], member[order], clocked, source[order])
            return self._absence(found)
        verdict = self.detector.update(ts[order], step[order], member[order], value[order])
        alerts = []
        for m in np.unique(verdict.member).tolist():
            rows = verdict.member == m
            life = self.lives.setdefault(m, Lifecycle.of(self.rule))
            entity = self.entity(m)
            for t in life.update(
                verdict.ts[rows],
                verdict.anomalous[rows],
                verdict.value[rows],
                verdict.peer_median[rows] if hasattr(verdict, "peer_median") else None,
            ):
                alerts.append(_alert(self.rule, entity, t))
        return alerts

    def _absence(self, findings: list[AbsenceFinding]) -> list[Alert]:
        alerts = []
        for f in findings:
            state = AlertState.FIRING if f.kind == "down" else AlertState.RESOLVED
            entity = self.entity(f.member)
            t = Transition(state, f.detected_at, f.silent_since, f.detected_at - f.silent_since)
            alerts.append(_alert(self.rule, entity, t))
        return alerts


#: A series read by a group: the group, its member and its source within the member.
_InGroup = tuple[_Group, int, int]


class Engine:
    """Runs ``rules`` over batches in data time; ``process`` returns the alerts that changed.

    Args:
        rules: the validated rules.
        detectors: detector constructors by the ``type`` rules name.
    """

    def __init__(
        self, rules: RuleSet, detectors: Mapping[str, Callable[..., Detector]] = DETECTORS
    ):
        self._detectors = detectors
        self._metric_rules = [r for r in rules.rules if r.signal.metrics]
        self._log_rules = [LogRule(r, r.signal.log) for r in rules.rules if r.signal.log]
        self._routes: dict[SeriesKey, list[_Binding | _InGroup | _AsOf]] = {}
        self._divisors: dict[tuple[tuple[str, str], tuple[tuple[str, str], ...]], _AsOf] = {}
        self._groups: dict[tuple[tuple[str, str], tuple[tuple[str, str], ...]], _Group] = {}
        self._dedup = Dedup()
        self.samples = 0

    def _divisor(self, rule: Rule, labels: Mapping[str, str]) -> _AsOf:
        entity = tuple(sorted(_entity(rule, labels).items()))
        return self._divisors.setdefault((rule.key, entity), _AsOf())

    def _bind(
        self, key: SeriesKey, carried: Mapping[tuple[str, str], _Binding] | None = None
    ) -> list[_Binding | _InGroup | _AsOf]:
        labels = dict(key.labels)
        labels.setdefault(PRODUCER, producer(key))  # which process of its node sent it
        bindings: list[_Binding | _InGroup | _AsOf] = []
        for rule in self._metric_rules:
            if any(labels.get(k, "") not in v for k, v in rule.signal.match):  # "": no such label
                continue
            if key.name == rule.signal.divide_by:
                bindings.append(self._divisor(rule, labels))
            if key.name not in rule.signal.metrics:
                continue
            if rule.detector is not None and across_members(self._detectors[rule.detector]):
                if all(k in labels for k in rule.signal.by):
                    scope = {k: labels[k] for k in ("run", *rule.signal.by[:-1]) if k in labels}
                    group = self._group(rule, scope)
                    member = group.member(labels[rule.signal.by[-1]])
                    bindings.append((group, member, group.source(member, labels[PRODUCER])))
                continue
            if carried and (kept := carried.get(rule.key)) is not None:
                kept.rule = rule
                bindings.append(kept)
                continue
            detector = None
            if rule.detector is not None:
                detector = self._detectors[rule.detector](**dict(rule.params))
            life = Lifecycle.of(rule)
            divisor = self._divisor(rule, labels) if rule.signal.divide_by else None
            bindings.append(_Binding(rule, _entity(rule, labels), detector, life, divisor))
        self._routes[key] = bindings
        return bindings

    def _group(self, rule: Rule, scope: dict[str, str]) -> _Group:
        key = (rule.key, tuple(sorted(scope.items())))
        group = self._groups.get(key)
        if group is None:
            detector = self._detectors[str(rule.detector)](**dict(rule.params))
            group = self._groups[key] = _Group(rule, scope, detector)
        return group

    def reload(self, rules: RuleSet) -> set[tuple[str, str]]:
        """Run ``rules`` from now on. A rule whose definition is unchanged (its place in the
        file aside) keeps its detectors and alert states; changed, new and removed rules lose
        theirs. Returns the keys of the rules whose state was dropped (changed or removed)."""
        old = {r.key: r for r in self._metric_rules} | {g.rule.key: g.rule for g in self._log_rules}
        kept = {r.key for r in rules.rules if r.key in old and _same(old[r.key], r)}
        new = {r.key: r for r in rules.rules}
        logs = {g.rule.key: g for g in self._log_rules if g.rule.key in kept}
        for log_rule in logs.values():
            log_rule.rule = new[log_rule.rule.key]
        self._metric_rules = [r for r in rules.rules if r.signal.metrics]
        self._log_rules = [
            logs.get(r.key) or LogRule(r, r.signal.log) for r in rules.rules if r.signal.log
        ]
        self._divisors = {k: d for k, d in self._divisors.items() if k[0] in kept}
        self._groups = {k: g for k, g in self._groups.items() if k[0] in kept}
        for group in self._groups.values():
            group.rule = new[group.rule.key]
        routes, self._routes = self._routes, {}
        for key, bindings in routes.items():
            carried = {
                b.rule.key: b for b in bindings if isinstance(b, _Binding) and b.rule.key in kept
            }
            self._bind(key, carried)
        self._dedup.firing = self._firing()  # what dropped rules held open is theirs no more
        return set(old) - kept

    def _firing(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], int]:
        """How many sources hold each (kind, entity) firing, from the lifecycles themselves."""
        counts: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
        sources = [
            (b.rule, b.entity)
            for bindings in self._routes.values()
            for b in bindings
            if isinstance(b, _Binding) and b.lifecycle.state == AlertState.FIRING
        ]
        for group in self._groups.values():
            members = [m for m, life in group.lives.items() if life.state == AlertState.FIRING]
            if isinstance(group.detector, Absence):
                members = group.detector.down
            sources += [(group.rule, group.entity(m)) for m in members]
        for rule, entity in sources:
            key = (rule.kind, tuple(sorted({**entity, **dict(rule.labels)}.items())))
            counts[key] = counts.get(key, 0) + 1
        return counts

    def forget_run(self, run: str) -> None:
        """Drop a run that ended: its series say nothing more, so their state is dead weight,
        and an alert of theirs still held open here would never resolve."""
        self._routes = {k: v for k, v in self._routes.items() if dict(k.labels).get("run") != run}
        self._divisors = {k: v for k, v in self._divisors.items() if dict(k[1]).get("run") != run}
        self._groups = {k: g for k, g in self._groups.items() if g.scope.get("run") != run}
        for log_rule in self._log_rules:
            log_rule.forget_run(run)
        self._dedup.firing = self._firing()

    def warming_up(self) -> list[tuple[Rule, dict[str, str], Warmup]]:
        """The rules and entities whose detectors still gather the baseline they judge by."""
        return [
            (b.rule, b.entity, warmup)
            for bindings in self._routes.values()
            for b in bindings
            if isinstance(b, _Binding)
            and b.detector is not None
            and (warmup := b.detector.warming_up()) is not None
        ]

    def firing(self, kind: str, labels: Mapping[str, str]) -> bool:
        """Whether a rule holds an alert of this kind about this entity firing now."""
        return (kind, tuple(sorted(labels.items()))) in self._dedup.firing

    def process(self, batch: SampleBatch) -> list[Alert]:
        """Feed one batch (each series' samples in time order); return alert transitions."""
        alerts: list[Alert] = []
        touched: dict[int, _Group] = {}
        self.samples += len(batch)
        routes = [self._routes[k] if k in self._routes else self._bind(k) for k in batch.keys]
        wanted = np.array([bool(r) for r in routes], dtype=bool)
        if len(batch) and wanted.any():
            order = np.argsort(batch.series, kind="stable")
            series = batch.series[order]
            bounds = np.flatnonzero(np.r_[True, series[1:] != series[:-1], True]).tolist()
            spans = [
                (int(series[a]), order[a:b])
                for a, b in zip(bounds[:-1], bounds[1:], strict=True)
                if wanted[int(series[a])]
            ]
            divisors = []
            for sid, rows in spans:  # divisors first: a sample may divide by one at its own ts
                for binding in routes[sid]:
                    if isinstance(binding, _AsOf):
                        binding.add(batch.ts[rows], batch.value[rows])
                        divisors.append(binding)
            for sid, rows in spans:
                alerts += self._feed(routes[sid], batch, rows, touched)
            for divisor in divisors:
                divisor.keep_last()
        for group in touched.values():
            alerts += group.flush()
        alerts.sort(key=lambda a: a.ts)
        alerts = self._dedup.admit(alerts)  # log alerts are one-off: they repeat on their own terms
        alerts += self._logs(batch.events)
        alerts.sort(key=lambda a: a.ts)
        return alerts

    def _feed(
        self,
        bindings: list[_Binding | _InGroup | _AsOf],
        batch: SampleBatch,
        rows: np.ndarray,
        touched: dict[int, _Group],
    ) -> list[Alert]:
        """One series' samples of this batch through every rule bound to it."""
        alerts = []
        every = batch.value[rows]
        for binding in bindings:
            if isinstance(binding, _AsOf):
                continue
            rule = binding[0].rule if isinstance(binding, tuple) else binding.rule
            judged = _where(rule, every, rows)
            ts, value = batch.ts[judged], batch.value[judged]
            if isinstance(binding, tuple):
                group, member, source = binding
                members = np.full(ts.shape[0], member, np.int64)
                sources = np.full(ts.shape[0], source, np.int64)
                group.parts.append((ts, batch.step[judged], value, members, sources))
                touched[id(group)] = group
                continue
            shown = value if binding.divisor is None else binding.divisor.divide(ts, value)
            active, baseline, predicted = binding.active(ts, shown)
            for t in binding.lifecycle.update(ts, active, shown, baseline, predicted):
                alerts.append(_alert(binding.rule, binding.entity, t))
        return alerts

    def _logs(self, events: list[Event]) -> list[Alert]:
        out = []
        for event in events:
            if event.kind != "log":
                continue
            for log_rule in self._log_rules:
                if log_rule.matches(event) and (alert := log_rule.fire(event)) is not None:
                    out.append(alert)
        return out
