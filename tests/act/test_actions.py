"""Remediation: requests by hand and by alerts, dry runs, approval of destructive runs, the
allow-list, and the audit record of every step."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from stepwatch.act import (
    ACTION_EVENT,
    AUDIT_EVENT,
    Action,
    ActionConflict,
    ActionState,
    AuditRecord,
    NotAllowed,
    PlaybookError,
    Remediation,
    UnknownAction,
    parse_playbooks,
)
from stepwatch.detect import LiveAlert
from stepwatch.model import Event

#: Writes its arguments after the first, as JSON, to the file named first.
WRITE_ARGS = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"


class Sink:
    """Where the remediation's events go (the collector's event log, in the collector)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def write(self, events: Sequence[Event]) -> None:
        self.events += events

    def audit(self) -> list[AuditRecord]:
        return [AuditRecord.from_event(e) for e in self.events if e.kind == AUDIT_EVENT]


def _playbooks(out: Path) -> str:
    python, script = json.dumps(sys.executable), json.dumps(WRITE_ARGS)
    return f"""\
playbooks:
  - name: write_args
    kind: command
    argv: [{python}, "-c", {script}, "{out}", "{{node}}", "gpu={{gpu}}"]
    destructive: false
    dry_run: false
  - name: preview_args
    kind: command
    argv: [{python}, "-c", {script}, "{out}", "{{node}}"]
    destructive: false
  - name: drain
    kind: command
    argv: [{python}, "-c", {script}, "{out}", "drained", "{{node}}"]
    dry_run: false
    triggers: [gpu_thermal]
  - name: hang
    kind: command
    argv: [{python}, "-c", "import time; time.sleep(600)"]
    destructive: false
    dry_run: false
    timeout: 1s
"""


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out.json"


@pytest.fixture
def remediation(sink: Sink, out: Path) -> Iterator[Remediation]:
    playbooks = parse_playbooks(_playbooks(out), "playbooks.yaml")
    started = Remediation(playbooks, sink.write).start()
    yield started
    started.stop()


def _final(remediation: Remediation, action_id: str) -> Action:
    deadline = time.monotonic() + 60
    while not (action := remediation.get(action_id)).final:
        assert time.monotonic() < deadline, f"action still {action.state}"
        time.sleep(0.02)
    return action


def _firing(kind: str, labels: dict[str, str], state: str = "firing") -> LiveAlert:
    return LiveAlert("a1", "site", kind, kind, state, "critical", 1.0, 1.0, 90.0, labels)


def test_a_label_with_shell_syntax_reaches_the_program_as_one_argument(
    remediation: Remediation, sink: Sink, out: Path
) -> None:
    node = "node1; rm -rf / && echo $(id) `reboot`"
    action = remediation.request("write_args", {"node": node, "gpu": "3"}, "alice")
    assert action.state == ActionState.QUEUED and not action.dry_run
    done = _final(remediation, action.id)
    assert (done.state, done.exit_code) == (ActionState.OK, 0)
    assert json.loads(out.read_text()) == [node, "gpu=3"]
    results = [(r.action, r.actor, r.what, r.result) for r in sink.audit()]
    assert results == [
        ("playbook", "alice", "request write_args", "queued"),
        ("playbook", "alice", "run write_args", "ok"),
    ]
    states = [Action.from_event(e).state for e in sink.events if e.kind == ACTION_EVENT]
    assert states == ["queued", "running", "ok"]


def test_a_command_dry_run_echoes_its_argv_and_runs_nothing(
    remediation: Remediation, sink: Sink, out: Path
) -> None:
    action = remediation.request("preview_args", {"node": "n1"}, "bob")
    done = _final(remediation, action.id)
    assert done.dry_run and done.state == ActionState.OK
    assert done.stdout.startswith("dry run: ") and str(out) in done.stdout
    assert not out.exists()
    assert sink.audit()[-1].result == "dry-run"
    with pytest.raises(NotAllowed, match="only runs dry"):
        remediation.request("preview_args", {"node": "n1"}, "bob", dry_run=False)


def test_past_its_timeout_a_playbook_is_killed(remediation: Remediation, sink: Sink) -> None:
    done = _final(remediation, remediation.request("hang", {}, "carol").id)
    assert done.state == ActionState.TIMEOUT and done.error == "killed after 1 s"
    assert sink.audit()[-1].result == "timeout"


def test_what_is_not_in_the_allow_list_never_runs_and_is_audited(
    remediation: Remediation, sink: Sink
) -> None:
    with pytest.raises(NotAllowed, match="not in the allow-list"):
        remediation.request("rm_rf", {"node": "n1"}, "mallory")
    with pytest.raises(PlaybookError, match="start with '-'"):
        remediation.request("write_args", {"node": "--force", "gpu": "0"}, "mallory")
    assert remediation.actions() == []
    refused = sink.audit()
    assert [(r.what, r.result) for r in refused] == [
        ("request rm_rf", "refused"),
        ("request write_args", "refused"),
    ]
    assert "not in the allow-list" in refused[0].detail["error"]


def test_a_destructive_run_waits_for_approval(
    remediation: Remediation, sink: Sink, out: Path
) -> None:
    action = remediation.request("drain", {"node": "n2"}, "alice")
    assert action.state == ActionState.PENDING
    time.sleep(0.2)  # nothing may run while it waits
    assert not out.exists() and remediation.get(action.id).state == ActionState.PENDING
    approved = remediation.approve(action.id, "bob", "node is idle")
    assert (approved.state, approved.decided_by) == (ActionState.QUEUED, "bob")
    done = _final(remediation, action.id)
    assert done.state == ActionState.OK and json.loads(out.read_text()) == ["drained", "n2"]
    with pytest.raises(ActionConflict, match="not pending"):
        remediation.reject(action.id, "carol")
    with pytest.raises(UnknownAction):
        remediation.approve("nope", "carol")
    trail = [(r.action, r.actor, r.what, r.result) for r in sink.audit()]
    assert trail == [
        ("playbook", "alice", "request drain", "pending"),
        ("approval", "bob", "approve drain", "approved"),
        ("playbook", "bob", "run drain", "ok"),
    ]
    assert sink.audit()[1].detail["comment"] == "node is idle"


def test_a_rejected_run_never_happens(remediation: Remediation, sink: Sink, out: Path) -> None:
    action = remediation.request("drain", {"node": "n2"}, "alice")
    rejected = remediation.reject(action.id, "bob", "jobs still on it")
    assert (rejected.state, rejected.decided_by) == (ActionState.REJECTED, "bob")
    with pytest.raises(ActionConflict):
        remediation.approve(action.id, "carol")
    time.sleep(0.2)
    assert not out.exists()
    assert sink.audit()[-1].result == "rejected"


def test_a_firing_alert_requests_the_playbooks_its_kind_triggers_once(
    remediation: Remediation, sink: Sink
) -> None:
    labels = {"node": "n3", "gpu": "1"}
    remediation.on_alert(_firing("gpu_thermal", labels, state="resolved"))
    remediation.on_alert(_firing("loss_spike", labels))
    remediation.on_alert(_firing("gpu_thermal", labels))
    remediation.on_alert(_firing("gpu_thermal", labels))  # the first still waits: no second
    deadline = time.monotonic() + 30
    while not remediation.actions():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    remediation.runner.submit(lambda: None)
    time.sleep(0.2)
    (action,) = remediation.actions()
    assert (action.playbook, action.requested_by, action.kind, action.alert_id) == (
        "drain",
        "alert:gpu_thermal",
        "gpu_thermal",
        "a1",
    )
    assert action.state == ActionState.PENDING and action.labels == labels
    (record,) = sink.audit()
    assert (record.kind, record.alert_id, record.result) == ("gpu_thermal", "a1", "pending")


def test_a_restart_keeps_pending_actions_and_fails_interrupted_ones(
    remediation: Remediation, sink: Sink, out: Path
) -> None:
    pending = remediation.request("drain", {"node": "n4"}, "alice")
    running = pending.but(id="r1", state=ActionState.RUNNING, playbook="hang")
    playbooks = remediation.playbooks
    again = Remediation(playbooks, sink.write, restored=[remediation.get(pending.id), running])
    again.start()
    try:
        assert again.get(pending.id).state == ActionState.PENDING
        assert again.get("r1").state == ActionState.FAILED
        assert again.get("r1").error == "the collector stopped"
    finally:
        again.stop()
