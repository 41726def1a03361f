"""An alert transition as the collector keeps it: a stable id, mute flags, and its event form.

The store holds one event of kind "alert" per transition; the API lists the
latest per id and streams each one, so the three share this one shape.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...model import Event
from ..engine import Alert, AlertState

__all__ = ["ALERT_EVENT", "LiveAlert", "alert_id"]

#: The event kind of an alert transition in the store.
ALERT_EVENT = "alert"


def alert_id(group: str, rule: str, labels: Mapping[str, str], since: float) -> str:
    """Stable across restarts: the same rule, entity and start give the same id."""
    text = json.dumps([group, rule, sorted(labels.items()), repr(float(since))])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class LiveAlert:
    """One transition of one alert (rule × entity × start of its condition)."""

    id: str
    group: str
    rule: str
    kind: str
    state: str
    severity: str
    since: float
    ts: float
    value: float
    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    playbook: str = ""
    baseline: float | None = None
    silenced: bool = False
    inhibited: bool = False
    reason: str = ""
    predicted_ts: float | None = None  # when a forecast expects its target to be reached

    @classmethod
    def of(cls, alert: Alert) -> LiveAlert:
        """The transition the engine reported, not yet checked against silences."""
        rule = alert.rule
        return cls(
            id=alert_id(rule.group, rule.alert, alert.labels, alert.since),
            group=rule.group,
            rule=rule.alert,
            kind=rule.kind,
            state=alert.state,
            severity=rule.severity,
            since=alert.since,
            ts=alert.ts,
            value=alert.value,
            labels=dict(alert.labels),
            annotations=dict(alert.annotations),
            playbook=rule.playbook,
            baseline=alert.baseline,
            predicted_ts=alert.predicted_ts,
        )

    @property
    def rule_key(self) -> tuple[str, str]:
        return (self.group, self.rule)

    @property
    def run(self) -> str | None:
        """The run it is about (none for an alert of the collector or a node alone)."""
        return self.labels.get("run")

    @property
    def muted(self) -> bool:
        """Silenced or inhibited: stored and shown, but nobody is notified."""
        return self.silenced or self.inhibited

    @property
    def match_labels(self) -> dict[str, str]:
        """What silence matchers see: the alert's labels plus kind, rule and severity."""
        return {**self.labels, "kind": self.kind, "rule": self.rule, "severity": self.severity}

    def but(self, **changes: Any) -> LiveAlert:
        return dataclasses.replace(self, **changes)

    def closed(self, ts: float, reason: str) -> LiveAlert:
        """This firing alert resolved by the collector, whose rule can no longer resolve it
        (its run finished, its rule changed)."""
        return self.but(state=AlertState.RESOLVED, ts=max(self.ts, ts), reason=reason)

    def as_json(self) -> dict[str, Any]:
        """The fields the API shows (non-finite values are the caller's to spell)."""
        return {
            "id": self.id,
            "rule": self.rule,
            "group": self.group,
            "kind": self.kind,
            "state": self.state,
            "severity": self.severity,
            "since": self.since,
            "ts": self.ts,
            "value": self.value,
            "baseline": self.baseline,
            "predicted_ts": self.predicted_ts,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "playbook": self.playbook,
            "silenced": self.silenced,
            "inhibited": self.inhibited,
            "reason": self.reason,
        }

    def to_event(self) -> Event:
        """The store's form: labels as the alert has them, everything else in ``data``."""
        data = self.as_json()
        text = self.annotations.get("summary") or f"{self.kind} {self.state}"
        return Event(self.ts, ALERT_EVENT, text, dict(self.labels), data)

    @classmethod
    def from_event(cls, event: Event) -> LiveAlert:
        """Back from the store (the inverse of ``to_event``)."""
        d = event.data
        return cls(
            id=str(d["id"]),
            group=str(d.get("group", "")),
            rule=str(d["rule"]),
            kind=str(d["kind"]),
            state=str(d["state"]),
            severity=str(d.get("severity", "")),
            since=float(d["since"]),
            ts=float(event.ts),
            value=float(d.get("value", float("nan"))),
            labels=dict(event.labels),
            annotations=dict(d.get("annotations") or {}),
            playbook=str(d.get("playbook", "")),
            baseline=None if d.get("baseline") is None else float(d["baseline"]),
            silenced=bool(d.get("silenced", False)),
            inhibited=bool(d.get("inhibited", False)),
            reason=str(d.get("reason", "")),
            predicted_ts=None if d.get("predicted_ts") is None else float(d["predicted_ts"]),
        )
