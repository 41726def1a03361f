"""One notification: a group of alerts for one receiver, and the words every receiver shares
(its title, its plain-text body, its JSON form), so each receiver only formats. A group of one
incident's alerts is told as the incident: its probable root cause first (in the title too),
the other alerts as its symptoms, and the playbooks for the cause."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from ..detect import AlertGroup, AlertState, LiveAlert
from ..wire import json_number
from ._incident_playbook import IncidentPlaybook

__all__ = ["IncidentNote", "Notification", "iso_time"]


def iso_time(ts: float) -> str:
    """RFC 3339 in UTC, as Alertmanager and people read it."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _value(value: float) -> str:
    return f"{value:.6g}" if math.isfinite(value) else str(json_number(value))


def _where(alert: LiveAlert) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(alert.labels.items())) or "the collector"


@dataclass(frozen=True)
class IncidentNote:
    """What a message says of the incident its alerts belong to: its id, its probable root
    cause (an alert of it, maybe one this route does not take) with the evidence, how many
    alerts it holds, and the playbooks for the cause."""

    id: str
    cause: LiveAlert
    evidence: tuple[str, ...]
    size: int
    playbooks: tuple[IncidentPlaybook, ...] = ()

    def lines(self) -> list[str]:
        """The cause and why, then each playbook and what became of its action."""
        out = [f"probable root cause: {self.cause.kind} on {_where(self.cause)}"]
        if self.size > 1:
            out.append(f"  why: {'; '.join(self.evidence)}")
        for p in self.playbooks:
            filed = f"action {p.action_id} {p.status}" if p.action_id else "no action filed"
            out.append(f"playbook {p.name}: {filed}")
            if p.description:
                out.append(f"  {p.description}")
        return out


@dataclass(frozen=True)
class Notification:
    """What one receiver is told about one group: ``key`` names the group (route and grouping
    labels), ``external_url`` the collector's dashboard the alerts link to, ``incident`` the
    incident of a group of one (its alerts come root cause first)."""

    receiver: str
    key: str
    group: AlertGroup[LiveAlert]
    external_url: str = ""
    incident: IncidentNote | None = None

    @property
    def alerts(self) -> tuple[LiveAlert, ...]:
        return self.group.alerts

    @property
    def firing(self) -> list[LiveAlert]:
        return [a for a in self.alerts if a.state == AlertState.FIRING]

    @property
    def status(self) -> str:
        """``firing`` while any alert of the group fires, else ``resolved``."""
        return "firing" if self.firing else "resolved"

    @property
    def common_labels(self) -> dict[str, str]:
        """The labels every alert shares (kind and severity count), e.g. the run."""
        first, *rest = (a.match_labels for a in self.alerts)
        return {k: v for k, v in first.items() if all(r.get(k) == v for r in rest)}

    def alert_url(self, alert: LiveAlert) -> str:
        """The alert in the dashboard's alert view; empty without an external URL."""
        if not self.external_url:
            return ""
        query = urlencode({"run": alert.labels.get("run", ""), "alert": alert.id})
        return f"{self.external_url.rstrip('/')}/#/alerts?{query}"

    @property
    def title(self) -> str:
        """``[FIRING:64] kind=straggler run=r1 (warning)``, or of an incident its cause:
        ``[FIRING:9] node_down node=n3 run=r1: probable cause of 9 alerts (critical)``."""
        count = len(self.firing) if self.firing else len(self.alerts)
        said = [f"[{self.status.upper()}:{count}]"]
        if self.incident is None:
            said += [f"{k}={v}" for k, v in self.group.labels.items() if k != "severity"]
        else:
            cause, size = self.incident.cause, self.incident.size
            said += [cause.kind, *(f"{k}={v}" for k, v in sorted(cause.labels.items()))]
            if size > 1:
                said[-1] += f": probable cause of {size} alerts"
        return " ".join([*said, f"({self.group.severity})"])

    def alert_lines(self, alert: LiveAlert) -> list[str]:
        """What happened, since when, the value, why it matters, what to do."""
        lines = [
            f"{alert.state.upper()} {alert.kind} ({alert.severity}) on {_where(alert)}",
            f"  what happened: {alert.annotations.get('summary') or alert.rule}",
            f"  since: {iso_time(alert.since)}",
            f"  value: {_value(alert.value)}",
        ]
        if alert.baseline is not None:
            lines.append(f"  judged against: {_value(alert.baseline)}")
        if alert.state != AlertState.FIRING:
            lines.append(f"  ended: {iso_time(alert.ts)}")
        if alert.annotations.get("description"):
            lines.append(f"  why it matters: {alert.annotations['description']}")
        if alert.playbook:
            lines.append(f"  playbook: {alert.playbook}")
        if self.alert_url(alert):
            lines.append(f"  dashboard: {self.alert_url(alert)}")
        return lines

    def text(self) -> str:
        """The plain-text body: the title, the incident's cause and playbooks, then each
        alert's lines (an incident's cause first, then its symptoms)."""
        out, note = [self.title, ""], self.incident
        if note is not None:
            out += [*note.lines(), ""]
        symptoms = [a for a in self.alerts if note is not None and a.id != note.cause.id]
        for alert in self.alerts:
            if symptoms and alert is symptoms[0]:
                out += ["symptoms:", ""]
            out += [*self.alert_lines(alert), ""]
        return "\n".join(out)

    def alert_json(self, alert: LiveAlert) -> dict[str, Any]:
        """One alert as the JSON bodies carry it (non-finite values spelled as strings)."""
        data = alert.as_json()
        spelled = {k: json_number(v) for k, v in data.items() if isinstance(v, float)}
        return {**data, **spelled, "url": self.alert_url(alert)}

    def as_json(self) -> dict[str, Any]:
        """The generic webhook's body."""
        return {
            "version": "1",
            "receiver": self.receiver,
            "status": self.status,
            "groupKey": self.key,
            "groupLabels": dict(self.group.labels),
            "commonLabels": self.common_labels,
            "title": self.title,
            "externalURL": self.external_url,
            "alerts": [self.alert_json(a) for a in self.alerts],
            "incident": None if self.incident is None else self._incident_json(self.incident),
        }

    def _incident_json(self, note: IncidentNote) -> dict[str, Any]:
        return {
            "id": note.id,
            "alerts": note.size,
            "root_cause": {"alert": self.alert_json(note.cause), "evidence": list(note.evidence)},
            "playbooks": [p.as_json() for p in note.playbooks],
        }
