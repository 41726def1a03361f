"""Deciding what to send and when, with no threads and no clock of its own: alert transitions
go in with the time, notifications come out when due. The notifier drives it; tests drive it
with made-up times.

Per route and per value of its ``group_by`` labels, alerts gather in a group. A new group
waits ``group_wait`` for the rest of its burst; after a message, changes wait
``group_interval``; a group that still fires with nothing new is sent again after
``repeat_interval``. An alert that fired and ended between two messages is still told once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..detect import AlertGroup, AlertState, LiveAlert, group_alerts
from ._notify_message import Notification
from ._routing import Route

__all__ = ["Dispatch"]


@dataclass
class _Group:
    """One group's alerts and what its receiver was told of them."""

    route: Route
    labels: dict[str, str]
    key: str
    next_at: float
    alerts: dict[str, LiveAlert] = field(default_factory=dict)
    seen_firing: set[str] = field(default_factory=set)
    told: set[str] = field(default_factory=set)
    told_firing: set[str] = field(default_factory=set)
    sent_at: float | None = None

    def add(self, alert: LiveAlert, now: float) -> None:
        self.alerts[alert.id] = alert
        if alert.state == AlertState.FIRING:
            self.seen_firing.add(alert.id)
        if self.sent_at is not None:  # a change waits for the group interval, no longer
            self.next_at = min(self.next_at, max(now, self.sent_at + self.route.group_interval))

    def news(self, now: float) -> list[LiveAlert] | None:
        """The alerts of the message due now, or None when nothing is to be said."""
        firing = [a for a in self.alerts.values() if a.state == AlertState.FIRING]
        ended = [a for a in self.alerts.values() if a.state != AlertState.FIRING]
        unheard = [a for a in ended if a.id in self.seen_firing and a.id not in self.told]
        over = [a for a in ended if a.id in self.told_firing] if self.route.send_resolved else []
        fresh = any(a.id not in self.told_firing for a in firing)
        last = self.sent_at
        repeat = bool(firing) and last is not None and now >= last + self.route.repeat_interval
        if not (fresh or unheard or over or repeat):
            return None
        return firing + unheard + over

    def settle(self, now: float, sent: list[LiveAlert] | None) -> None:
        """After a look at the group: what it was told, when to look next; ended alerts go."""
        firing = {i for i, a in self.alerts.items() if a.state == AlertState.FIRING}
        if sent is not None:
            self.told |= {a.id for a in sent}
            self.sent_at = now
        self.told_firing = (firing if sent is not None else self.told_firing) & firing
        self.alerts = {i: a for i, a in self.alerts.items() if i in firing}
        self.seen_firing &= firing
        if sent is not None:
            self.next_at = now + self.route.group_interval
        elif firing and self.sent_at is not None:
            self.next_at = self.sent_at + self.route.repeat_interval
        else:
            self.next_at = math.inf


class Dispatch:
    """Alert transitions in (``add``), notifications out (``due``), for one route tree."""

    def __init__(self, route: Route, external_url: str = "") -> None:
        self.route, self.external_url = route, external_url
        self._groups: dict[str, _Group] = {}

    def add(self, alert: LiveAlert, now: float) -> None:
        """File a transition into the group of each route that takes it."""
        for route in self.route.find(alert.match_labels):
            (group,) = group_alerts([alert], route.group_by)
            labels = ",".join(f"{k}={v}" for k, v in group.labels.items())
            key = f"{route.path}:{route.receiver}:{{{labels}}}"
            held = self._groups.get(key)
            if held is None:
                held = self._groups[key] = _Group(route, group.labels, key, now + route.group_wait)
            held.add(alert, now)

    def next_due(self) -> float:
        """When ``due`` may next have something (``inf``: nothing is waiting)."""
        return min((g.next_at for g in self._groups.values()), default=math.inf)

    def due(self, now: float, *, all_groups: bool = False) -> list[Notification]:
        """The messages due at ``now`` (with ``all_groups``, every unsent change now, as at a
        shutdown)."""
        out: list[Notification] = []
        for key, group in list(self._groups.items()):
            if group.next_at > now and not all_groups:
                continue
            sent = group.news(now)
            if sent:
                alerts = AlertGroup(dict(group.labels), tuple(sent))
                out.append(Notification(group.route.receiver, key, alerts, self.external_url))
            group.settle(now, sent or None)
            if not group.alerts:
                del self._groups[key]
        return out
