"""One notification: a group of alerts for one receiver, and the words every receiver shares
(its title, its plain-text body, its JSON form), so each receiver only formats."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from ..detect import AlertGroup, AlertState, LiveAlert
from ..wire import json_number

__all__ = ["Notification", "iso_time"]


def iso_time(ts: float) -> str:
    """RFC 3339 in UTC, as Alertmanager and people read it."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _value(value: float) -> str:
    return f"{value:.6g}" if math.isfinite(value) else str(json_number(value))


@dataclass(frozen=True)
class Notification:
    """What one receiver is told about one group: ``key`` names the group (route and grouping
    labels), ``external_url`` the collector's dashboard the alerts link to."""

    receiver: str
    key: str
    group: AlertGroup[LiveAlert]
    external_url: str = ""

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
        """``[FIRING:64] straggler run=r1 (warning)``: one line for a subject or a header."""
        count = len(self.firing) if self.firing else len(self.alerts)
        labels = [f"{k}={v}" for k, v in self.group.labels.items() if k != "severity"]
        return " ".join([f"[{self.status.upper()}:{count}]", *labels, f"({self.group.severity})"])

    def alert_lines(self, alert: LiveAlert) -> list[str]:
        """What happened, since when, the value, why it matters, what to do."""
        where = ", ".join(f"{k}={v}" for k, v in sorted(alert.labels.items()))
        lines = [
            f"{alert.state.upper()} {alert.kind} ({alert.severity}) on {where or 'the collector'}",
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
        """The plain-text body: the title, then each alert's lines."""
        out = [self.title, ""]
        for alert in self.alerts:
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
        }
