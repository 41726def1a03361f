"""Policy decisions: escalation while an alert fires, cool-downs, the cap on automatic actions,
observe-only, muted alerts; every decision audited."""

from __future__ import annotations

import time

from stepwatch.act import AUDIT_EVENT, AuditRecord, Policies
from stepwatch.detect import DETECTORS, AlertState, parse_rules

from ._policy_parts import Harness, alert, policies


def test_steps_escalate_while_the_alert_fires() -> None:
    h = Harness(policies())
    h.engine.on_alert(alert())
    assert h.commands() == [] and h.decisions() == [("step 1 notify", "ok")]
    h.at(29)
    assert h.commands() == []
    h.at(30)
    assert h.commands() == ["lower_lr"]
    assert h.book.after("r1")[0].args == {"factor": 0.5}
    h.at(300)
    assert h.commands() == ["lower_lr", "checkpoint", "stop"]
    assert h.decisions()[1:] == [
        ("step 2 lower_lr", "issued"),
        ("step 3 checkpoint", "issued"),
        ("step 4 stop", "issued"),
    ]
    command = h.book.after("r1")[0]
    assert (command.by, command.kind, command.alert_id) == (
        "policy:divergence", "loss_divergence", alert().id,
    )  # fmt: skip
    assert h.engine.actions("r1") == 3


def test_a_resolved_alert_ends_its_escalation() -> None:
    h = Harness(policies())
    h.engine.on_alert(alert())
    h.at(40)
    h.engine.on_alert(alert(AlertState.RESOLVED))
    h.at(600)
    assert h.commands() == ["lower_lr"]
    assert h.decisions()[-1] == ("escalation ended", "ended")


def test_the_cool_down_keeps_a_policy_off_a_run_it_acted_on() -> None:
    h = Harness(policies())
    h.engine.on_alert(alert())
    h.at(30)
    h.engine.on_alert(alert(AlertState.RESOLVED))
    h.at(100)
    h.engine.on_alert(alert(since=100))  # fires again 70 s after the last command
    h.at(200)
    assert h.commands() == ["lower_lr"]
    assert h.decisions()[-1] == ("cooling down", "skipped")
    h.engine.on_alert(alert(since=100, state=AlertState.RESOLVED))
    h.at(631)  # past the 10 minutes
    h.engine.on_alert(alert(since=631))
    h.at(661)
    assert h.commands() == ["lower_lr", "lower_lr"]
    other = Harness(policies())
    other.engine.on_alert(alert(run="r2"))
    other.at(30)
    assert other.commands("r2") == ["lower_lr"]  # cool-downs are per run


def test_no_more_automatic_actions_than_the_cap() -> None:
    h = Harness(policies(most=2))
    h.engine.on_alert(alert())
    h.at(300)
    assert h.commands() == ["lower_lr", "checkpoint"]
    assert h.decisions()[-1] == ("step 4 stop", "skipped")
    skipped = [AuditRecord.from_event(e) for e in h.events if e.kind == AUDIT_EVENT][-1]
    assert "2 automatic actions" in skipped.detail["why"]


def test_observe_only_audits_what_it_would_have_done_and_sends_nothing() -> None:
    h = Harness(policies(observe=True))
    h.engine.on_alert(alert())
    h.at(300)
    assert h.commands() == []
    assert h.decisions() == [
        ("step 1 notify", "ok"),
        ("step 2 lower_lr", "would have"),
        ("step 3 checkpoint", "would have"),
        ("step 4 stop", "would have"),
    ]


def test_muted_alerts_other_kinds_and_runless_alerts_start_nothing() -> None:
    h = Harness(policies())
    h.engine.on_alert(alert(silenced=True))
    h.engine.on_alert(alert(inhibited=True, since=1))
    h.engine.on_alert(alert(kind="loss_plateau"))
    runless = alert().but(labels={"node": "n1"})
    h.engine.on_alert(runless)
    h.at(600)
    assert h.commands() == [] and h.decisions() == []


def test_a_reload_without_policies_stops_new_decisions() -> None:
    h = Harness(policies())
    h.policies = Policies()
    h.engine.on_alert(alert())
    h.at(600)
    assert h.commands() == []


def test_the_engine_thread_takes_due_steps_and_stops() -> None:
    h = Harness(policies())
    h.engine.on_alert(alert())
    h.clock.now += 30
    h.engine.start()
    try:
        deadline = 200
        while not h.commands() and deadline:
            time.sleep(0.05)
            deadline -= 1
    finally:
        h.engine.stop()
    assert h.commands() == ["lower_lr"]


SLOW_STEPS = """
policies:
  rules:
    - name: slow_steps
      kinds: [straggler, step_time_regression]
      steps:
        - {action: profile, args: {steps: 3}}
        - {after: 1m, action: checkpoint}
"""


def test_a_profile_step_profiles_the_rank_the_alert_names_or_else_every_rank() -> None:
    found = parse_rules(SLOW_STEPS, "p.yaml", DETECTORS).policies
    assert found is not None
    h = Harness(found)
    h.engine.on_alert(alert(kind="straggler").but(labels={"run": "r1", "rank": "5"}))
    h.engine.on_alert(alert(kind="step_time_regression", run="r2"))
    h.at(60)
    assert [(c.action, c.ranks) for c in h.book.after("r1")] == [
        ("profile", (5,)), ("checkpoint", ()),  # a checkpoint is every rank's
    ]  # fmt: skip
    assert [(c.action, c.args, c.ranks) for c in h.book.after("r2")][0] == (
        "profile", {"steps": 3.0}, (),
    )  # fmt: skip
    assert h.decisions()[0] == ("step 1 profile", "issued")
