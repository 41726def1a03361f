"""Deciding what to send and when, with no threads and no clock of its own: alert transitions
go in with the time, notifications come out when due. The notifier drives it; tests drive it
with made-up times.

Per route and per value of its ``group_by`` labels, alerts gather in a group; ``incident``
(the default) is the incident an alert joins as it arrives (``OpenIncidents``: the rule of
the incidents API), so a fault and its symptoms are one message, its root cause first. A new
group waits ``group_wait`` for the rest of its burst; after a message, changes wait
``group_interval``; a group that still fires with nothing new is sent again after
``repeat_interval``. An alert that fired and ended between two messages is still told once.

Across restarts the groups and the incidents are kept (``state``, ``load``) and the audit
trail tells what was sent after that (``sent``); a transition of an alert that already ended
(a recovery replay handing it over again) is not filed twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from ..detect import AlertGroup, AlertIncident, AlertState, LiveAlert, OpenIncidents
from ._incident_playbook import PlaybooksOf, no_playbooks
from ._notify_message import IncidentNote, Notification
from ._routing import INCIDENT, Route
from ._state import alert_of, malformed

__all__ = ["Dispatch"]

#: Ended alerts remembered, so that a transition of theirs handed over again is not filed.
MAX_ENDED = 10_000
Times = Callable[[float], float]
#: One message the audit trail tells of: the alerts it told firing, those it told ended, when.
Heard = tuple[list[str], list[str], float]


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
        self.told &= firing  # what ended is told and gone
        self.alerts = {i: a for i, a in self.alerts.items() if i in firing}
        self.seen_firing &= firing
        if sent is not None:
            self.next_at = now + self.route.group_interval
        elif firing and self.sent_at is not None:
            self.next_at = self.sent_at + self.route.repeat_interval
        else:
            self.next_at = math.inf

    def heard(self, firing: Collection[str], ended: Collection[str], at: float) -> None:
        """A message the audit trail says went out at ``at`` (this state may predate it)."""
        self.told |= {*firing, *ended}
        self.told_firing = (self.told_firing | set(firing)) - set(ended)
        self.sent_at = at if self.sent_at is None else max(self.sent_at, at)

    def as_json(self, wall: Times) -> dict[str, Any]:
        return {
            "key": self.key, "path": self.route.path, "receiver": self.route.receiver,
            "labels": self.labels, "next_at": _time(self.next_at, wall),
            "alerts": [a.as_json() for a in self.alerts.values()],
            "seen_firing": sorted(self.seen_firing), "told": sorted(self.told),
            "told_firing": sorted(self.told_firing), "sent_at": _time(self.sent_at, wall),
        }  # fmt: skip

    @classmethod
    def of_json(cls, data: dict[str, Any], route: Route, back: Times) -> _Group:
        sent_at, next_at = _time(data["sent_at"], back), _time(data["next_at"], back)
        group = cls(route, dict(data["labels"]), str(data["key"]), _never(next_at))
        group.alerts = {a.id: a for a in map(alert_of, data["alerts"])}
        group.seen_firing, group.told = set(data["seen_firing"]), set(data["told"])
        group.told_firing, group.sent_at = set(data["told_firing"]), sent_at
        return group


def _time(t: float | None, convert: Times) -> float | None:
    """A time from one clock to the other; ``None`` for no time (or never)."""
    return None if t is None or math.isinf(t) else convert(float(t))


def _never(t: float | None) -> float:
    return math.inf if t is None else t


class Dispatch:
    """Alert transitions in (``add``), notifications out (``due``), for one route tree;
    ``playbooks`` gives the playbooks of an incident's root cause, for its messages."""

    def __init__(
        self, route: Route, external_url: str = "", playbooks: PlaybooksOf = no_playbooks
    ) -> None:
        self.route, self.external_url, self._playbooks = route, external_url, playbooks
        self._incidents: OpenIncidents[LiveAlert] = OpenIncidents()
        self._groups: dict[str, _Group] = {}
        self._ended: dict[str, None] = {}  # alert ids, oldest first
        self._heard: dict[str, list[Heard]] = {}  # messages of groups not held (group key)

    def add(self, alert: LiveAlert, now: float) -> None:
        """File a transition into the group of each route that takes it (none of an alert
        that has ended: it was handed over again)."""
        if alert.id in self._ended:
            return
        incident = self._incidents.join(alert, ended=alert.state == AlertState.RESOLVED)
        values = {**alert.match_labels, INCIDENT: incident.id}
        for route in self.route.find(alert.match_labels):
            grouped = {k: values.get(k, "") for k in route.group_by}
            labels = ",".join(f"{k}={v}" for k, v in grouped.items())
            key = f"{route.path}:{route.receiver}:{{{labels}}}"
            held = self._groups.get(key)
            if held is None:
                held = self._groups[key] = _Group(route, grouped, key, now + route.group_wait)
                for heard in self._heard.pop(key, []):
                    held.heard(*heard)
            held.add(alert, now)
        if alert.state == AlertState.RESOLVED:
            self._end([alert.id])

    def _end(self, ids: Collection[str]) -> None:
        for alert_id in ids:
            self._ended[alert_id] = None
        while len(self._ended) > MAX_ENDED:
            del self._ended[next(iter(self._ended))]

    def sent(self, key: str, firing: Collection[str], ended: Collection[str], at: float) -> None:
        """A message to group ``key`` went out at ``at`` (as the audit trail says): what it
        told is not told again, and its repeat is counted from then."""
        self._end(ended)
        held = self._groups.get(key)
        if held is not None:
            held.heard(firing, ended, at)
        elif len(self._heard) < MAX_ENDED:
            self._heard.setdefault(key, []).append((sorted(firing), sorted(ended), at))

    def state(self, wall: Times) -> dict[str, Any]:
        """The groups and the memory of ended alerts, times on the clock ``wall`` gives."""
        heard = {k: [[f, e, wall(at)] for f, e, at in v] for k, v in self._heard.items()}
        groups = [g.as_json(wall) for g in self._groups.values()]
        held = self._incidents.held.values()
        incidents = [[a.as_json() for a in i.alerts] for i in held]
        return {
            "groups": groups, "ended": list(self._ended), "heard": heard,
            "incidents": incidents, "open": dict(self._incidents.open),
        }  # fmt: skip

    def load(self, state: dict[str, Any], back: Times) -> list[str]:
        """Take back ``state`` (times back through ``back``); the keys of groups whose route
        the config no longer has (left out); ValueError for a malformed state."""
        routes = {(r.path, r.receiver): r for r in self.route.walk()}
        gone: list[str] = []
        with malformed("notify"):
            for data in state["groups"]:
                route = routes.get((str(data["path"]), str(data["receiver"])))
                if route is None:
                    gone.append(str(data["key"]))
                    continue
                group = _Group.of_json(data, route, back)
                self._groups[group.key] = group
            self._end([str(i) for i in state["ended"]])
            for key, heard in dict(state["heard"]).items():
                self._heard[str(key)] = [(list(f), list(e), back(float(at))) for f, e, at in heard]
            for listed in state.get("incidents", []):  # none in a checkpoint of an older version
                alerts = [alert_of(a) for a in listed]
                incident = AlertIncident(alerts[0].run, alerts)
                self._incidents.held[incident.id] = incident
            self._incidents.open.update({str(k): str(v) for k, v in state.get("open", {}).items()})
        return gone

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
                note, sent = self._told(group, sent)
                alerts = AlertGroup(dict(group.labels), tuple(sent))
                receiver, url = group.route.receiver, self.external_url
                out.append(Notification(receiver, key, alerts, url, note))
            group.settle(now, sent or None)
            if not group.alerts:
                del self._groups[key]
        held = self._groups.values()
        self._incidents.forget({g.labels[INCIDENT] for g in held if INCIDENT in g.labels})
        return out

    def _told(
        self, group: _Group, sent: list[LiveAlert]
    ) -> tuple[IncidentNote | None, list[LiveAlert]]:
        """The incident of a group of one (and its playbooks) and the alerts to send, its
        root cause first, then its symptoms as they rank; no incident for another group."""
        if INCIDENT not in group.labels:
            return None, sent
        incident = self._incidents.held[group.labels[INCIDENT]]
        causes = incident.causes()
        rank = {c.alert.id: n for n, c in enumerate(causes)}
        cause = causes[0]
        ids = [a.id for a in incident.alerts]
        playbooks = tuple(self._playbooks(cause.alert.kind, ids))
        note = IncidentNote(incident.id, cause.alert, cause.evidence, len(ids), playbooks)
        return note, sorted(sent, key=lambda a: rank[a.id])
