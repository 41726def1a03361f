"""The alerts live detection holds open, and how each new transition is judged against them:
silences, inhibition by what fires (or resolved a moment ago), and the alerts a previous life
of the collector recorded that this one continues under their own ids."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..alerts import Inhibition, RecentlyResolved, inhibited
from ..engine import AlertState
from ._live_alert import LiveAlert
from ._recovery import Recovery, adopt, continues

__all__ = ["OpenAlerts"]

#: Whether a silence mutes an alert of these match labels now.
Mutes = Callable[[Mapping[str, str]], bool]


class OpenAlerts:
    """What fires now (by id), which of those a previous life recorded (``adopted``), and what
    resolved recently: the part of the live detector's state that is about alerts."""

    def __init__(self, inhibitions: Sequence[Inhibition]) -> None:
        self.inhibitions = tuple(inhibitions)
        self.open: dict[str, LiveAlert] = {}
        self.adopted: set[str] = set()  # open alerts a previous life recorded, continued here
        self.resolved = RecentlyResolved(self.inhibitions)

    def rebind(self, inhibitions: Sequence[Inhibition]) -> None:
        """After a restore: the inhibitions of this life, not of the one that saved the state."""
        self.inhibitions = tuple(inhibitions)
        self.resolved.rules = self.inhibitions

    def adopt(self, recovery: Recovery) -> None:
        """Line up with the alerts the store holds (see ``_recovery.adopt``)."""
        self.adopted |= adopt(self.open, recovery)

    def continues(self, alert: LiveAlert) -> bool:
        """A firing an adopted alert of the same kind and entity already stands for."""
        return continues(alert, self.open, self.adopted)

    def judged(self, alert: LiveAlert, mutes: Mutes) -> LiveAlert:
        """Set the mute flags: silences at wall time now, inhibition by what fires now."""
        silenced = mutes(alert.match_labels)
        if alert.state == AlertState.FIRING:
            firing = [(a.kind, a.labels) for a in self.open.values() if a.id != alert.id]
            recent = self.resolved.at(alert.ts)
            muted = inhibited(alert.kind, alert.labels, firing, self.inhibitions, recent, alert.ts)
            return alert.but(silenced=silenced, inhibited=muted)
        before = self.open.get(alert.id) or self._opened_for(alert)
        if before is None:
            return alert.but(silenced=silenced)
        return before.but(  # the alert that opened it closes, whichever rule said so last
            state=alert.state, ts=alert.ts, value=alert.value, silenced=silenced or before.silenced
        )

    def _opened_for(self, alert: LiveAlert) -> LiveAlert | None:
        """The open alert of the same kind and entity (several rules may speak for one)."""
        for candidate in self.open.values():
            if candidate.kind == alert.kind and candidate.labels == alert.labels:
                return candidate
        return None

    def track(self, alert: LiveAlert) -> None:
        """Keep a firing alert open; close a resolved one (inhibition still sees it a while)."""
        if alert.state == AlertState.FIRING:
            self.open[alert.id] = alert
            self.resolved.discard(alert.kind, alert.labels)
        else:
            self.open.pop(alert.id, None)
            self.adopted.discard(alert.id)
            self.resolved.add(alert.kind, alert.labels, alert.ts)

    def of_run(self, run: str) -> list[LiveAlert]:
        """The open alerts of one run."""
        return [a for a in self.open.values() if a.labels.get("run") == run]

    def drop_run(self, run: str) -> None:
        """Stop holding a run's alerts (they stay as the store holds them)."""
        self.open = {i: a for i, a in self.open.items() if a.labels.get("run") != run}
