"""Replay: the live engine run over recorded data as fast as it goes (scenarios, exports, stores).

This is how users test rules on past incidents; each recorded run gets a
fresh engine, as a live run would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..alerts import DEFAULT_INHIBITIONS, AlertRecord, Inhibition, RecentlyResolved, inhibited
from ..engine import Alert, AlertState, Engine
from ..rules import RuleSet
from ._recorded import read_recorded

__all__ = ["replay", "to_record"]


def replay(
    path: str | Path,
    rules: RuleSet,
    *,
    run: str | None = None,
    on_samples: Callable[[int], object] = lambda n: None,
    inhibitions: Sequence[Inhibition] = DEFAULT_INHIBITIONS,
    until: float | None = None,
) -> Iterator[Alert]:
    """The alerts that begin to fire over one recorded run, in data-time order, less those an
    alert firing at that moment inhibits (what would have reached people); with ``until``,
    over its data up to that time only."""
    engine = Engine(rules)
    firing: dict[tuple[str, tuple[tuple[str, str], ...]], Alert] = {}
    resolved = RecentlyResolved(inhibitions)
    for chunk in read_recorded(path, run=run, until=until):
        for alert in engine.process(chunk.batch):
            key = (alert.kind, tuple(sorted(alert.labels.items())))
            if alert.state == AlertState.RESOLVED:
                firing.pop(key, None)
                resolved.add(alert.kind, alert.labels, alert.ts)
            elif alert.state == AlertState.FIRING:
                sources = [(a.kind, a.labels) for a in firing.values()]
                if alert.rule.signal.metrics:  # a log alert is an event: nothing resolves it
                    firing[key] = alert
                    resolved.discard(alert.kind, alert.labels)
                recent = resolved.at(alert.ts)
                muted = inhibited(alert.kind, alert.labels, sources, inhibitions, recent, alert.ts)
                if not muted:
                    yield alert
        on_samples(len(chunk.batch))


def to_record(alert: Alert) -> AlertRecord:
    """An alert as a line of an alerts file (the scenarios' format plus what it says)."""
    return AlertRecord.of(
        alert.kind,
        alert.ts,
        alert.labels,
        severity=alert.severity,
        rule=alert.rule.alert,
        since=alert.since,
        value=alert.value,
        baseline=alert.baseline,
        predicted_ts=alert.predicted_ts,
        summary=alert.annotations.get("summary", ""),
    )
