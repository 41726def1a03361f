"""Picking up where a previous life of the collector left off.

At start the live detector replays what the store took since its checkpoint.
What it finds again, the store mostly holds already: a transition recorded
before the restart (same id, same state or later) is neither recorded again
nor told to anyone; one the store lacks (it happened after the last record
was written) is recorded and told once. Firing alerts the store holds that the
detector does not know (no checkpoint, or one it cannot read) stay firing,
adopted: the rule that fires for the same kind and entity continues them, and
only data resolves them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ...model import SampleBatch
from ...store import Position
from ..engine import AlertState
from ._live_alert import LiveAlert

__all__ = ["Recovery", "adopt", "continues", "recorded_before"]


@dataclass(frozen=True, slots=True)
class Recovery:
    """What the detector replays at start, where that ends, and the alerts the store holds.

    Args:
        batches: the data since the checkpoint, in the order the store took it (read lazily,
            on the detector thread).
        end: the store position the replay reaches; a fed commit within it is not detected
            twice.
        recorded: the latest transition the store holds of an alert, by id (None: none).
        firing: the alerts the store holds firing.
    """

    batches: Iterable[SampleBatch]
    end: Position
    recorded: Callable[[str], LiveAlert | None]
    firing: Sequence[LiveAlert]

    @classmethod
    def of(
        cls, batches: Iterable[SampleBatch], end: Position, held: Mapping[str, LiveAlert]
    ) -> Recovery:
        """A recovery against alerts held in memory (their latest transitions, by id)."""
        firing = [a for a in held.values() if a.state == AlertState.FIRING]
        return cls(batches, end, held.get, firing)


def recorded_before(alert: LiveAlert, recorded: Callable[[str], LiveAlert | None]) -> bool:
    """The store holds this transition already: the same state, or a later one, of this id."""
    stored = recorded(alert.id)
    return stored is not None and stored.state in (alert.state, AlertState.RESOLVED)


def adopt(open_alerts: dict[str, LiveAlert], recovery: Recovery) -> set[str]:
    """Bring the open alerts in line with the store: those it holds resolved (a run that
    finished, say) are closed, those it holds firing are open. The ids adopted."""
    for alert_id in list(open_alerts):
        stored = recovery.recorded(alert_id)
        if stored is not None and stored.state == AlertState.RESOLVED:
            del open_alerts[alert_id]
    adopted = set()
    for alert in recovery.firing:
        if alert.id not in open_alerts:
            open_alerts[alert.id] = alert
            adopted.add(alert.id)
    return adopted


def continues(alert: LiveAlert, open_alerts: Mapping[str, LiveAlert], adopted: set[str]) -> bool:
    """A firing that an adopted alert of the same kind and entity already stands for."""
    return alert.state == AlertState.FIRING and any(
        a.id in adopted and a.id != alert.id and a.kind == alert.kind and a.labels == alert.labels
        for a in open_alerts.values()
    )
