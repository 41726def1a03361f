"""Incidents as alerts arrive one transition at a time (the notifier hears them so): a new
alert joins the incident it fits by the rule ``incidents`` applies to a whole list, or begins
one, and its later transitions stay with it. An incident is forgotten once none of its alerts
is open, no new alert can join it any more and nobody holds on to it."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Generic

from ._incidents import WINDOW_S, A, AlertIncident, joins

__all__ = ["OpenIncidents"]


@dataclass
class OpenIncidents(Generic[A]):
    """The incidents still to be joined or with an alert still open.

    Args:
        window_s: how long after an incident's newest alert another may join it.
        held: the incidents by id, oldest first.
        open: each open alert's incident (its id).
    """

    window_s: float = WINDOW_S
    held: dict[str, AlertIncident[A]] = field(default_factory=dict)
    open: dict[str, str] = field(default_factory=dict)

    def join(self, alert: A, ended: bool) -> AlertIncident[A]:
        """The incident of a transition of ``alert`` (``ended``: its last one)."""
        known = self.open.get(alert.id)
        held = self.held.values()
        home = self.held[known] if known is not None else joins(alert, held, self.window_s)
        if home is None:
            home = AlertIncident(alert.run, [alert])
            self.held[home.id] = home
        elif known is None:
            home.alerts.append(alert)
        if ended:
            self.open.pop(alert.id, None)
        else:
            self.open[alert.id] = home.id
        return home

    def forget(self, keep: Collection[str] = ()) -> None:
        """Drop the incidents of no open alert whose window has passed (the newest alert
        began more than ``window_s`` after theirs), except those of ``keep`` (ids)."""
        latest = max((i.last for i in self.held.values()), default=-math.inf)
        busy = {*self.open.values(), *keep}
        for key, incident in list(self.held.items()):
            if key not in busy and latest - incident.last > self.window_s:
                del self.held[key]
