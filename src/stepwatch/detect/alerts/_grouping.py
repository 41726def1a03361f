"""Alert groups: a burst of alerts that share some labels is one thing to look at (and, for the
notifiers, one message): 64 stragglers of one run are one group by ``kind`` and ``run``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ..rules import SEVERITIES

__all__ = ["AlertGroup", "group_alerts"]


class _Groupable(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def since(self) -> float: ...
    @property
    def labels(self) -> Mapping[str, str]: ...


A = TypeVar("A", bound=_Groupable)


@dataclass(frozen=True)
class AlertGroup(Generic[A]):
    """Alerts with equal values of the grouping labels (``kind`` and ``severity`` count as
    labels); the most severe and the earliest stand for the group."""

    labels: dict[str, str]
    alerts: tuple[A, ...]

    @property
    def severity(self) -> str:
        return max((a.severity for a in self.alerts), key=_rank)

    @property
    def since(self) -> float:
        return min(a.since for a in self.alerts)


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


def group_alerts(alerts: Iterable[A], by: Sequence[str]) -> list[AlertGroup[A]]:
    """Alerts grouped by the values of ``by``; the most severe group first, then the oldest."""
    groups: dict[tuple[str, ...], list[A]] = {}
    for alert in alerts:
        values = {**alert.labels, "kind": alert.kind, "severity": alert.severity}
        groups.setdefault(tuple(values.get(k, "") for k in by), []).append(alert)
    out = [
        AlertGroup(dict(zip(by, key, strict=True)), tuple(members))
        for key, members in groups.items()
    ]
    out.sort(key=lambda g: (-_rank(g.severity), g.since))
    return out
