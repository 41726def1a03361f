"""An alert that changed state, as the engine tells it: made from a rule's lifecycle transition
with the rule's annotations rendered for the entity it is about."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..rules import Rule, render
from ._lifecycle import Transition

__all__ = ["Alert"]


@dataclass(frozen=True, slots=True)
class Alert:
    """An alert that changed state: which rule, about which entity, when, and what to say."""

    rule: Rule
    state: str
    ts: float
    since: float
    value: float
    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    baseline: float | None = None  # what the value was judged against, when the rule has it
    predicted_ts: float | None = None  # when a forecast expects its target, when it has one

    @property
    def kind(self) -> str:
        return self.rule.kind

    @property
    def severity(self) -> str:
        return self.rule.severity


def _entity(rule: Rule, labels: Mapping[str, str]) -> dict[str, str]:
    """The alert's entity: the run plus the labels the rule groups by."""
    keys = ("run", *rule.signal.by)
    return {k: labels[k] for k in keys if k in labels}


def _utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _in(seconds: float) -> str:
    """A time left as people say it: "~40 s", "~12 min", "~2.5 h"."""
    seconds = max(seconds, 0.0)
    if seconds < 90:
        return f"~{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds / 3600:.1f} h"


def _alert(rule: Rule, entity: dict[str, str], t: Transition) -> Alert:
    labels = {**entity, **dict(rule.labels)}
    ahead = t.predicted_ts
    values = {
        "value": t.value,
        "baseline": t.baseline,
        "since": _utc(t.since),
        "kind": rule.kind,
        "severity": rule.severity,
        "predicted": "" if ahead is None else _utc(ahead),
        "eta": "" if ahead is None else _in(ahead - t.ts),
    }
    notes = {name: render(text, labels, values) for name, text in rule.annotations}
    return Alert(rule, t.state, t.ts, t.since, t.value, labels, notes, t.baseline, ahead)
