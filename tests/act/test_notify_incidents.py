"""Notifications per incident: a fault and its symptoms (a node down, timeouts of the
collectives on every node, slower steps, stragglers) are one message to a real webhook, its
root cause first and named in the title, with the playbook the cause requested; two faults on
two nodes are two messages; a restart keeps an incident's group."""

from __future__ import annotations

import json

from stepwatch.act import (
    Dispatch,
    Notifier,
    NotifyConfig,
    Remediation,
    Retry,
    Route,
    SlackReceiver,
    WebhookReceiver,
    parse_playbooks,
)
from stepwatch.act._notify_state import Saved
from stepwatch.detect import LiveAlert
from stepwatch.model import Event

from ._notify_parts import T0, alert, recording_server

ROUTE = Route("hook", group_wait=30.0, group_interval=300.0, repeat_interval=3600.0)
PLAYBOOKS = """\
playbooks:
  - name: drain_node
    kind: command
    argv: [echo, drain, "{node}"]
    dry_run: false
    triggers: [node_down]
    description: move the run off the node
"""
DOWN = alert("node_down", severity="critical", node="n3")


NCCL = [alert("log_nccl", since=T0 + 20 + i, node=f"n{i}") for i in range(1, 5)]


def _burst() -> list[LiveAlert]:
    """What one node going down makes, in the order the detector reports it: the node is
    down once it has been silent a while, after the collectives timed out everywhere."""
    return [
        *NCCL,
        alert("step_time_regression", since=T0 + 60),
        DOWN,
        alert("straggler", since=T0 + 90, node="n1", rank="3"),
    ]


def _remediation(events: list[Event]) -> Remediation:
    """The allow-list with the action the node's alert filed (pending: it is destructive)."""
    remediation = Remediation(parse_playbooks(PLAYBOOKS, "playbooks.yaml"), events.extend)
    remediation.request("drain_node", DOWN.labels, "alert:node_down", DOWN.id, DOWN.kind)
    return remediation


def _notifier(url: str, audit: list[Event], remediation: Remediation) -> Notifier:
    hook = WebhookReceiver("hook", url, retry=Retry(retries=0))
    config = NotifyConfig({"hook": hook}, ROUTE)
    return Notifier(config, audit.extend, playbooks=remediation.for_incident)


def test_a_node_down_and_its_symptoms_are_one_message_led_by_the_cause() -> None:
    events: list[Event] = []
    remediation = _remediation(events)
    (action,) = remediation.actions()
    with recording_server() as server:
        notifier = _notifier(server.url, events, remediation).start()
        for fired in _burst():
            notifier.submit(fired)
        notifier.stop()  # what waits for its group goes out now
        (request,) = server.wait_for(1)
    body = json.loads(request.body)
    assert (
        body["title"]
        == "[FIRING:7] node_down node=n3 run=r1: probable cause of 7 alerts (critical)"
    )
    assert body["groupLabels"] == {"incident": NCCL[0].id}  # the first alert heard
    kinds = [a["kind"] for a in body["alerts"]]
    assert kinds == ["node_down", *["log_nccl"] * 4, "step_time_regression", "straggler"]
    incident = body["incident"]
    assert (incident["id"], incident["alerts"]) == (NCCL[0].id, 7)
    assert incident["root_cause"]["alert"]["id"] == DOWN.id
    assert (
        "may explain log_nccl, step_time_regression, straggler"
        in incident["root_cause"]["evidence"]
    )
    assert incident["playbooks"] == [
        {"name": "drain_node", "description": "move the run off the node",
         "action_id": action.id, "status": "pending"},
    ]  # fmt: skip


def test_the_text_names_the_cause_then_lists_the_symptoms_and_the_playbook() -> None:
    remediation = _remediation([])
    (action,) = remediation.actions()
    dispatch = Dispatch(ROUTE, playbooks=remediation.for_incident)
    for fired in _burst():
        dispatch.add(fired, T0)
    (sent,) = dispatch.due(T0 + 30)
    lines = sent.text().splitlines()
    assert lines[2:6] == [
        "probable root cause: node_down on node=n3, run=r1",
        "  why: a hardware or storage alert; the first of the incident's 7 alerts; may explain "
        "log_nccl, step_time_regression, straggler; on n3",
        f"playbook drain_node: action {action.id} pending",
        "  move the run off the node",
    ]
    told = [line for line in lines if line.startswith(("FIRING ", "symptoms:"))]
    assert told[0].startswith("FIRING node_down (critical) on node=n3, run=r1")
    assert told[1] == "symptoms:" and len(told) == 8


def test_two_faults_on_two_nodes_are_two_messages() -> None:
    dispatch = Dispatch(ROUTE)
    dispatch.add(alert("gpu_errors", severity="critical", node="n1", gpu="0"), T0)
    dispatch.add(alert("disk_full", since=T0 + 5, node="n2"), T0 + 5)
    dispatch.add(alert("straggler", since=T0 + 10, node="n1", rank="3"), T0 + 10)
    sent = dispatch.due(T0 + 40)
    said = {n.incident.cause.kind: [a.kind for a in n.alerts] for n in sent if n.incident}
    assert said == {"gpu_errors": ["gpu_errors", "straggler"], "disk_full": ["disk_full"]}
    assert sorted(n.title for n in sent) == [
        "[FIRING:1] disk_full node=n2 run=r1 (warning)",
        "[FIRING:2] gpu_errors gpu=0 node=n1 run=r1: probable cause of 2 alerts (critical)",
    ]


def test_after_a_restart_a_new_symptom_joins_its_incident_and_its_message() -> None:
    events: list[Event] = []
    remediation = _remediation(events)
    later = alert("straggler", since=T0 + 90, node="n1", rank="3")
    with recording_server() as server:
        first = _notifier(server.url, events, remediation).start()
        for fired in [*NCCL, DOWN]:
            first.submit(fired)
        first.stop()
        saved = first.snapshot()
        again = _notifier(server.url, events, remediation)
        again.restore(saved)
        again.start()
        again.submit(later)
        again.stop()
        told, retold = (json.loads(r.body) for r in server.wait_for(2))
    assert retold["groupKey"] == told["groupKey"]
    assert retold["incident"]["id"] == NCCL[0].id and retold["incident"]["alerts"] == 6
    assert retold["title"].startswith("[FIRING:6] node_down node=n3 run=r1")
    assert [a["id"] for a in retold["alerts"]][0] == DOWN.id
    assert later.id in [a["id"] for a in retold["alerts"]]


def test_slack_shows_the_cause_and_its_playbook_under_the_title() -> None:
    dispatch = Dispatch(ROUTE, playbooks=_remediation([]).for_incident)
    for fired in _burst():
        dispatch.add(fired, T0)
    (sent,) = dispatch.due(T0 + 30)
    with recording_server() as server:
        SlackReceiver("chat", server.url).send(sent)
        (request,) = server.wait_for(1)
    header, cause, first, *_ = json.loads(request.body)["blocks"]
    assert header["text"]["text"].startswith("[FIRING:7] node_down node=n3 run=r1")
    assert cause["text"]["text"].startswith("probable root cause: node_down on node=n3, run=r1")
    assert "playbook drain_node: action " in cause["text"]["text"]
    assert first["text"]["text"].startswith("*FIRING node_down (critical)")


def test_a_message_not_yet_delivered_at_a_checkpoint_keeps_its_incident() -> None:
    dispatch = Dispatch(ROUTE, playbooks=_remediation([]).for_incident)
    for fired in _burst():
        dispatch.add(fired, T0)
    (sent,) = dispatch.due(T0 + 30)
    (back,) = Saved.decode(Saved(T0, dispatch.state(float), [], [sent]).encode()).unsent
    assert back.incident is not None and back.incident == sent.incident
    assert back.text() == sent.text()
