"""The Alertmanager receiver: alerts pushed to its v2 API, so a team's own Alertmanager routes,
silences and pages as it always does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..detect import AlertState, LiveAlert
from ._notify_message import Notification, iso_time
from ._receivers import Retry, post_json

__all__ = ["AlertmanagerReceiver", "alertmanager_alerts"]


def _alert(notification: Notification, alert: LiveAlert) -> dict[str, Any]:
    labels = {"alertname": alert.rule, "kind": alert.kind, "severity": alert.severity}
    labels.update(alert.labels)
    annotations = {
        "summary": alert.annotations.get("summary", ""),
        "description": alert.annotations.get("description", ""),
        "playbook": alert.playbook,
    }
    out: dict[str, Any] = {
        "labels": {k: v for k, v in labels.items() if v},  # an empty label is no label
        "annotations": {k: v for k, v in annotations.items() if v},
        "startsAt": iso_time(alert.since),
    }
    if alert.state != AlertState.FIRING:
        out["endsAt"] = iso_time(max(alert.ts, alert.since))
    if notification.external_url:
        out["generatorURL"] = notification.alert_url(alert)
    return out


def alertmanager_alerts(notification: Notification) -> list[dict[str, Any]]:
    """The body of ``POST /api/v2/alerts``: one postable alert per alert of the group; a
    resolved one carries its ``endsAt``."""
    return [_alert(notification, a) for a in notification.alerts]


@dataclass(frozen=True, slots=True)
class AlertmanagerReceiver:
    """Pushes to the Alertmanager at ``url`` (its base, e.g. ``http://am:9093``).

    A firing alert is sent without an end: Alertmanager resolves it by itself after its
    ``resolve_timeout`` unless it is sent again, so a route to it wants a ``repeat_interval``
    shorter than that.
    """

    name: str
    url: str = field(repr=False)  # it may carry user:password
    timeout_s: float = 10.0
    retry: Retry = Retry()

    def send(self, notification: Notification) -> None:
        endpoint = f"{self.url.rstrip('/')}/api/v2/alerts"
        post_json(endpoint, alertmanager_alerts(notification), self.timeout_s)
