"""One alert per kind and entity, however many rules and series say so.

Several series can speak for one entity (the eight ranks of a node for a
by-node rule) and several rules for one kind (a NaN loss and a NaN gradient
norm are both ``nonfinite``): the first of them to fire opens the alert, the
last to resolve closes it, and the ones in between add nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from ._lifecycle import AlertState

__all__ = ["Dedup"]


class _Transition(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def labels(self) -> dict[str, str]: ...


T = TypeVar("T", bound=_Transition)


class Dedup:
    """Counts the firing sources of each (kind, entity) and passes on only the openings and
    closings; pending transitions pass while the alert is not open."""

    def __init__(self) -> None:
        self.firing: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}

    def admit(self, alerts: Iterable[T]) -> list[T]:
        out = []
        for alert in alerts:
            key = (alert.kind, tuple(sorted(alert.labels.items())))
            count = self.firing.get(key, 0)
            if alert.state == AlertState.FIRING:
                self.firing[key] = count + 1
                keep = count == 0
            elif alert.state == AlertState.RESOLVED:
                if count <= 1:
                    self.firing.pop(key, None)
                else:
                    self.firing[key] = count - 1
                keep = count <= 1
            else:
                keep = count == 0
            if keep:
                out.append(alert)
        return out
