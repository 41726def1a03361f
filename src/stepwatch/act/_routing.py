"""The route tree, as Alertmanager has it: an alert walks down from the root to the routes
whose matchers it meets; the first matching child takes it unless that child says
``continue``, and a route none of whose children match takes it itself.

An alert of severity ``info`` is a record, not a message (a producer's telemetry gap, an idle
GPU): only a route that matches on ``severity`` itself, or below one that does, takes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..detect import Matcher

__all__ = ["DEFAULT_GROUP_BY", "INCIDENT", "Route"]

#: A ``group_by`` name that is no label of the alert: the incident it belongs to (its id), so
#: that a fault and its symptoms (node down, timeouts on every rank, stragglers) are one group.
INCIDENT = "incident"
#: One message per incident; ``group_by: [kind, run]`` has one per kind and run instead.
DEFAULT_GROUP_BY = (INCIDENT,)
#: The severity that reaches receivers only through a route that asks for it by severity.
RECORD_ONLY = "info"


@dataclass(frozen=True, slots=True)
class Route:
    """Where matching alerts go and how they are batched.

    Args:
        receiver: the receiver's name.
        matchers: all must match the alert's labels (``kind``, ``rule`` and ``severity``
            count as labels).
        group_by: alerts with equal values of these labels make one message (``incident``:
            the incident an alert belongs to, before any label of that name).
        group_wait: seconds a new group waits for more alerts before its first message.
        group_interval: seconds between messages about a group whose alerts changed.
        repeat_interval: seconds after which a group still firing is sent again.
        send_resolved: tell the receiver when alerts it was told about end.
        proceed: the YAML's ``continue``: siblings after this one are tried too.
        routes: the children.
        path: where the route is in the file (``route.routes[1]``): part of its groups' keys.
    """

    receiver: str
    matchers: tuple[Matcher, ...] = ()
    group_by: tuple[str, ...] = DEFAULT_GROUP_BY
    group_wait: float = 10.0
    group_interval: float = 60.0
    repeat_interval: float = 4 * 3600.0
    send_resolved: bool = True
    proceed: bool = False
    routes: tuple[Route, ...] = ()
    path: str = "route"

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.matchers)

    def find(self, labels: Mapping[str, str], asked: bool = False) -> list[Route]:
        """The routes that take an alert with these labels (none when this one does not
        match; the root has no matchers, so it takes what no child does, but an ``info``
        alert only when a route on the way ``asked`` for it by severity)."""
        if not self.matches(labels):
            return []
        asked = asked or any(m.label == "severity" for m in self.matchers)
        found: list[Route] = []
        for child in self.routes:
            taken = child.find(labels, asked)
            found += taken
            if taken and not child.proceed:
                break
        if found or asked or labels.get("severity") != RECORD_ONLY:
            return found or [self]
        return []

    def walk(self) -> list[Route]:
        """This route and every one below it."""
        return [self, *(r for child in self.routes for r in child.walk())]
