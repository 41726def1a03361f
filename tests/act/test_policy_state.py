"""The policy engine across restarts: its snapshot round-trips; a restored engine takes a
pending step once, at its time or at once when it fell due while the collector was down; a
step taken after the checkpoint (read back from the store's audit trail) is not taken again;
budgets stay spent and cool-downs run on in wall time; an unreadable snapshot is refused."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepwatch.act import AUDIT_EVENT, COMMAND_EVENT, AuditRecord, Policies
from stepwatch.detect import DETECTORS, AlertState, LiveAlert, parse_rules
from stepwatch.store import Store

from ._policy_parts import T0, Harness, alert, policies


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "policy.duckdb") as opened:
        yield opened


def _body(state: bytes) -> dict[str, object]:
    data = json.loads(state)
    data.pop("taken")
    return dict(data)


def test_a_snapshot_round_trips(store: Store) -> None:
    h = Harness(policies(), store=store)
    h.engine.on_alert(alert())
    h.at(30)  # notify and lower_lr taken; checkpoint and stop pending
    h.engine.on_alert(alert(run="r2"))
    h.at(40)
    h.engine.on_alert(alert(AlertState.RESOLVED, run="r2"))  # r2 ends after one step
    state = h.engine.snapshot()
    after = h.restarted(state, at=50)
    assert _body(after.engine.snapshot()) == _body(state)
    assert after.engine.actions("r1") == 1


def test_a_pending_step_is_taken_once_at_its_time(store: Store) -> None:
    h = Harness(policies(), store=store)
    h.engine.on_alert(alert())
    h.at(30)
    after = h.restarted(h.engine.snapshot(), at=100)
    after.engine.on_alert(alert())  # a recovery replay hands the transition over again
    after.at(299)
    assert after.commands() == ["lower_lr"] and after.decisions() == []
    after.at(300)
    after.at(301)
    assert after.commands() == ["lower_lr", "checkpoint", "stop"]
    assert after.decisions() == [("step 3 checkpoint", "issued"), ("step 4 stop", "issued")]
    assert "late" not in after.audits()[0].detail
    assert after.engine.actions("r1") == 3


def test_a_step_due_while_the_collector_was_down_is_taken_at_once_and_says_so(
    store: Store,
) -> None:
    h = Harness(policies(), store=store)
    h.engine.on_alert(alert())
    h.at(30)
    after = h.restarted(h.engine.snapshot(), at=400)  # down from 30 s to 400 s
    after.engine.tick()
    after.engine.tick()
    assert after.commands() == ["lower_lr", "checkpoint", "stop"]
    late = after.audits()[0].detail
    assert late["late"] == "due while the collector was down" and late["late_s"] == 100.0


def test_a_step_taken_after_the_checkpoint_is_not_taken_again(store: Store) -> None:
    h = Harness(policies(), store=store)
    h.engine.on_alert(alert())
    state = h.engine.snapshot()  # only the notify step taken
    h.at(30)  # lower_lr issued and stored, then the collector is killed
    after = h.restarted(state, at=40)
    after.engine.on_alert(alert())
    after.at(60)
    assert after.commands() == ["lower_lr"] and after.decisions() == []
    assert after.engine.actions("r1") == 1
    after.at(300)
    assert after.commands() == ["lower_lr", "checkpoint", "stop"]


def test_an_escalation_begun_after_the_checkpoint_goes_on_where_it_was(store: Store) -> None:
    h = Harness(policies(), store=store)
    state = h.engine.snapshot()  # before the alert fired
    h.engine.on_alert(alert())
    h.at(30)
    after = h.restarted(state, at=40)
    after.engine.on_alert(alert())  # the replay of the data since the checkpoint fires it again
    after.at(41)
    assert after.commands() == ["lower_lr"] and after.decisions() == []  # no cool-down skip
    after.at(300)
    assert after.commands() == ["lower_lr", "checkpoint", "stop"]
    assert after.decisions() == [("step 3 checkpoint", "issued"), ("step 4 stop", "issued")]


def test_an_escalation_that_ended_after_the_checkpoint_starts_nothing_again(
    store: Store,
) -> None:
    h = Harness(policies(), store=store)
    state = h.engine.snapshot()
    h.engine.on_alert(alert())
    h.engine.on_alert(alert(AlertState.RESOLVED))
    after = h.restarted(state, at=40)
    after.engine.on_alert(alert())  # the replay: fired and resolved again
    after.at(400)
    after.engine.on_alert(alert(AlertState.RESOLVED))
    assert after.commands() == [] and after.decisions() == []


def test_a_budget_spent_stays_spent(store: Store) -> None:
    h = Harness(policies(most=2), store=store)
    h.engine.on_alert(alert())
    h.at(300)  # lower_lr and checkpoint: the run's two automatic commands
    h.engine.on_alert(alert(AlertState.RESOLVED))
    after = h.restarted(h.engine.snapshot(), at=1000)  # past the cool-down
    after.engine.on_alert(alert(since=1000))
    after.at(1030)
    assert after.commands() == ["lower_lr", "checkpoint"]
    assert after.decisions()[-1] == ("step 2 lower_lr", "skipped")


def test_a_cool_down_runs_on_in_wall_time(store: Store) -> None:
    h = Harness(policies(), store=store)
    h.engine.on_alert(alert())
    h.at(30)
    h.engine.on_alert(alert(AlertState.RESOLVED))
    after = h.restarted(h.engine.snapshot(), at=100)
    after.engine.on_alert(alert(since=100))
    after.at(200)
    assert after.commands() == ["lower_lr"]
    assert after.decisions() == [("cooling down", "skipped")]
    after.engine.on_alert(alert(AlertState.RESOLVED, since=100))
    after.at(631)  # ten minutes after the last command
    after.engine.on_alert(alert(since=631))
    after.at(661)
    assert after.commands() == ["lower_lr", "lower_lr"]


def test_an_escalation_of_a_policy_the_rules_no_longer_have_is_dropped(store: Store) -> None:
    h = Harness(policies(), store=store)
    h.engine.on_alert(alert())
    state = h.engine.snapshot()
    h.policies = Policies()
    after = h.restarted(state, at=10)
    h.policies = after.policies = policies()
    after.at(400)
    assert after.commands() == []


@pytest.mark.parametrize(
    "state",
    [
        b"\x00\xff not json",
        b"[1, 2]",
        b'{"format": 0, "active": []}',
        b'{"format": 99}',
        b'{"format": 1, "taken": 5.0}',
        b'{"format": 1, "taken": 5, "active": [{"policy": "divergence"}], "past": [],'
        b' "acted": [], "actions": {}}',
        b'{"format": 1, "taken": 5, "active": [], "past": [[1, 2]], "acted": [], "actions": {}}',
    ],
)
def test_an_unreadable_snapshot_is_refused_and_the_engine_starts_empty(state: bytes) -> None:
    h = Harness(policies())
    with pytest.raises(ValueError, match="the policy checkpoint"):
        h.engine.restore(state)
    assert h.engine.actions("r1") == 0
    h.engine.on_alert(alert())
    h.at(30)
    assert h.commands() == ["lower_lr"]


Op = tuple[str, str] | tuple[str, float]
OPS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["fire", "resolve"]), st.sampled_from(["r1", "r2"])),
        st.tuples(st.just("wait"), st.sampled_from([5.0, 30.0, 200.0, 700.0])),
    ),
    min_size=1,
    max_size=25,
)


class Scenario:
    """Alerts firing and resolving on two runs as time passes; what each op handed over."""

    def __init__(self, h: Harness) -> None:
        self.h, self.now = h, 0.0
        self.firing: dict[str, LiveAlert] = {}
        self.told: list[LiveAlert] = []

    def apply(self, op: Op) -> None:
        kind, arg = op
        if kind == "wait":
            assert isinstance(arg, float)
            self.now += arg
            self.h.at(self.now)
            return
        assert isinstance(arg, str)
        if kind == "fire" and arg not in self.firing:
            self.firing[arg] = alert(run=arg, since=self.now)
            self.hand_over(self.firing[arg])
        elif kind == "resolve" and arg in self.firing:
            self.hand_over(self.firing.pop(arg).but(state=AlertState.RESOLVED))

    def hand_over(self, transition: LiveAlert) -> None:
        self.told.append(transition)
        self.h.clock.now = T0 + self.now
        self.h.engine.on_alert(transition)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, cut=st.data())
def test_whenever_the_collector_dies_no_step_is_taken_twice_and_no_budget_overspent(
    ops: list[Op], cut: st.DataObject
) -> None:
    crash = cut.draw(st.integers(0, len(ops)), label="crash after op")
    checkpoint = cut.draw(st.integers(0, crash), label="checkpoint after op")
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.duckdb") as store:
        first = Scenario(Harness(policies(most=2), store=store))
        for i, op in enumerate([*ops[:crash], None]):
            if i == checkpoint:
                state, since = first.h.engine.snapshot(), len(first.told)
            if op is not None:
                first.apply(op)
        after = Scenario(first.h.restarted(state, at=first.now))
        after.now, after.firing = first.now, first.firing
        for transition in first.told[since:]:  # the replay of the data since the checkpoint
            after.hand_over(transition)
        for op in [*ops[crash:], ("wait", 700.0), ("wait", 700.0)]:
            after.apply(op)
        records = store.records(kind=AUDIT_EVENT, limit=10**5)
        steps = Counter(
            (a.alert_id, a.detail["step"])
            for a in map(AuditRecord.from_event, records)
            if a.action == "policy" and "step" in a.detail
        )
        per_run = Counter(c.labels["run"] for c in store.records(kind=COMMAND_EVENT))
    assert [k for k, n in steps.items() if n > 1] == []
    assert all(n <= 2 for n in per_run.values()), per_run


def test_an_escalation_begun_after_the_checkpoint_keeps_its_start(store: Store) -> None:
    text = """
policies:
  rules:
    - name: later
      kinds: [loss_divergence]
      steps:
        - {after: 30s, action: lower_lr}
"""
    waiting = parse_rules(text, "p.yaml", DETECTORS).policies
    assert waiting is not None
    h = Harness(waiting, store=store)
    state = h.engine.snapshot()
    h.engine.on_alert(alert())  # nothing done at once: the escalation's start is a record
    after = h.restarted(state, at=20)
    after.engine.on_alert(alert())  # the replay, 20 s after the alert first came
    after.at(30)
    assert after.commands() == ["lower_lr"]
    assert h.decisions() == [("escalation begun", "begun")]
