"""Real parts for the policy tests: the policies, a wall clock the test moves, alerts as the
detector hands them over, and an engine whose records go to a list and, where given, to a real
store that a restarted engine reads back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from stepwatch.act import (
    AUDIT_EVENT,
    AuditRecord,
    CommandBook,
    Policies,
    PolicyEngine,
)
from stepwatch.detect import DETECTORS, AlertState, LiveAlert, parse_rules
from stepwatch.model import Event, RecordBatch
from stepwatch.store import Store

POLICIES = """
policies:
  max_actions_per_run: {most}
  observe_only: {observe}
  rules:
    - name: divergence
      kinds: [loss_divergence]
      cooldown: 10m
      steps:
        - {{action: notify}}
        - {{after: 30s, action: lower_lr, args: {{factor: 0.5}}}}
        - {{after: 5m, action: checkpoint}}
        - {{after: 5m, action: stop}}
"""
T0 = 1000.0
SOURCE = "stepwatch.collector"


def policies(most: int = 5, observe: bool = False) -> Policies:
    text = POLICIES.format(most=most, observe=str(observe).lower())
    found = parse_rules(text, "p.yaml", DETECTORS).policies
    assert found is not None
    return found


@dataclass
class Clock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    """One life of the engine; ``store`` (when given) outlives it, as the collector's does."""

    policies: Policies
    clock: Clock = field(default_factory=Clock)
    store: Store | None = None
    book: CommandBook = field(init=False)
    events: list[Event] = field(default_factory=list)
    engine: PolicyEngine = field(init=False)

    def __post_init__(self) -> None:
        self.book = CommandBook(clock=self.clock)
        history = None if self.store is None else self.history
        if self.store is not None:  # the queue comes back from the store, as at a start
            self.book.restore(self.store.current.commands(live=True))
        self.engine = PolicyEngine(
            lambda: self.policies, self.book, self.record, clock=self.clock, history=history
        )

    def record(self, events: Sequence[Event]) -> None:
        self.events += events
        if self.store is not None:
            self.store.apply([RecordBatch.of(SOURCE, list(events))])

    def history(self, since: float) -> list[Event]:
        assert self.store is not None
        return self.store.records(kind=AUDIT_EVENT, start=since)

    def restarted(self, state: bytes | None, at: float) -> Harness:
        """The next life: a new engine on the same store, restored from ``state``."""
        self.clock.now = T0 + at
        after = Harness(self.policies, self.clock, self.store)
        if state is not None:
            after.engine.restore(state)
        return after

    def at(self, seconds: float) -> None:
        self.clock.now = T0 + seconds
        self.engine.tick()

    def commands(self, run: str = "r1") -> list[str]:
        return [c.action for c in self.book.after(run)]

    def audits(self) -> list[AuditRecord]:
        records = [AuditRecord.from_event(e) for e in self.events if e.kind == AUDIT_EVENT]
        return [a for a in records if a.action == "policy"]

    def decisions(self) -> list[tuple[str, str]]:
        return [(a.what.split(": ", 1)[1], a.result) for a in self.audits()]


def alert(
    state: str = AlertState.FIRING,
    run: str = "r1",
    kind: str = "loss_divergence",
    since: float = 0.0,
    **flags: bool,
) -> LiveAlert:
    return LiveAlert(
        id=f"{kind}-{run}-{since}", group="g", rule=kind, kind=kind, state=state,
        severity="critical", since=since, ts=since, value=2.0, labels={"run": run}, **flags,
    )  # fmt: skip
