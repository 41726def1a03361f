"""Playbooks and the audit trail over HTTP, against a real collector started with --playbooks:
a real ansible-playbook run on localhost (check mode first, for real once approved), rejection,
refusal outside the allow-list, an alert that requests its playbook, and the audit listing.
The collector runs with auth: an operator requests, other identities (admins) approve."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

WAIT_S = 60.0

PLAY = """\
- hosts: all
  connection: local
  gather_facts: false
  tasks:
    - name: mark the node drained
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "drained {{ node }} of run {{ run }}\\n"
"""

RULES = """\
groups:
  - name: site
    rules:
      - alert: gpu_too_hot
        kind: gpu_thermal
        signal: {metric: gpu.temp_c, by: [run, node, gpu]}
        threshold: "> 80"
        severity: critical
"""


def _playbooks(tmp: Path, out: Path) -> str:
    (tmp / "drain.yml").write_text(PLAY)
    return f"""\
playbooks:
  - name: drain_node
    kind: ansible
    playbook: drain.yml
    inventory: "localhost,"
    vars: {{out: {json.dumps(str(out))}, ansible_python_interpreter: {json.dumps(sys.executable)}}}
    destructive: true
    dry_run: false
    timeout: 2m
    triggers: [gpu_thermal]
"""


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "drained.txt"


@pytest.fixture
def api(collector_factory: Any, tmp_path: Path, out: Path) -> Any:
    (tmp_path / "playbooks.yaml").write_text(_playbooks(tmp_path, out))
    (tmp_path / "rules.yaml").write_text(RULES)
    args = (
        "--playbooks",
        str(tmp_path / "playbooks.yaml"),
        "--rules",
        str(tmp_path / "rules.yaml"),
    )
    collector = collector_factory(auth=True, extra_args=args)
    with httpx.Client(base_url=collector.url, timeout=WAIT_S, headers=collector.headers) as client:
        for run in ("r1", "r2", "r3", "r5"):
            _ok(client.post("/api/v1/runs", json={"id": run, "project": "default"}))
        client.collector = collector  # type: ignore[attr-defined]
        yield client


def _as(api: httpx.Client, role: str) -> dict[str, str]:
    """The headers of the ``role`` token of project ``default``."""
    return dict(api.collector.headers_of(role))  # type: ignore[attr-defined]


def _actor(api: httpx.Client, name: str) -> str:
    """How audit records name the token called ``name``."""
    (token,) = [t for t in _ok(api.get("/api/v1/tokens")) if t["name"] == name]
    return f"{name} ({token['id']})"


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def _final(api: httpx.Client, action_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        action = _ok(api.get(f"/api/v1/actions/{action_id}"))
        if action["state"] not in ("queued", "running"):
            return dict(action)
        assert time.monotonic() < deadline, f"action still {action['state']}"
        time.sleep(0.05)


def test_ansible_runs_in_check_mode_then_for_real_once_approved(
    api: httpx.Client, out: Path
) -> None:
    labels = {"node": "node1; rm -rf /", "run": "r1"}
    request = {"playbook": "drain_node", "labels": labels}
    alice, bob = _actor(api, "operator-default"), _actor(api, "admin-default")
    operator = _as(api, "operator")
    dry = _ok(api.post("/api/v1/actions", json={**request, "dry_run": True}, headers=operator))
    assert (dry["state"], dry["dry_run"]) == ("queued", True)
    dry = _final(api, dry["id"])
    assert (dry["state"], dry["exit_code"]) == ("ok", 0), dry
    assert "changed: [localhost]" in dry["stdout"] and "PLAY RECAP" in dry["stdout"]
    assert not out.exists(), "check mode wrote the file"

    real = _ok(api.post("/api/v1/actions", json=request, headers=operator))
    assert (real["state"], real["dry_run"]) == ("pending", False)
    time.sleep(0.3)
    assert not out.exists() and _final(api, real["id"])["state"] == "pending"
    approve = f"/api/v1/actions/{real['id']}/approve"
    assert api.post(approve, json={}, headers=operator).status_code == 403  # not an admin
    approved = _ok(api.post(approve, json={}, headers=_as(api, "admin")))
    assert (approved["state"], approved["decided_by"]) == ("queued", bob)
    done = _final(api, real["id"])
    assert (done["state"], done["exit_code"]) == ("ok", 0), done
    assert "changed: [localhost]" in done["stdout"]
    assert out.read_text() == "drained node1; rm -rf / of run r1\n"
    again = api.post(approve, json={}, headers=_as(api, "admin"))
    assert again.status_code == 409 and "not pending" in again.json()["error"]

    trail = _ok(api.get("/api/v1/audit", params={"run": "r1"}))
    steps = [(r["action"], r["actor"], r["what"], r["result"]) for r in trail]
    assert steps == [  # newest first
        ("playbook", bob, "run drain_node", "ok"),
        ("approval", bob, "approve drain_node", "approved"),
        ("playbook", alice, "request drain_node", "pending"),
        ("playbook", alice, "run drain_node", "dry-run"),
        ("playbook", alice, "request drain_node", "queued"),
    ]
    assert {r["detail"]["action_id"] for r in trail[:3]} == {real["id"]}
    assert trail[0]["labels"] == labels and trail[0]["detail"]["exit_code"] == 0
    approvals = _ok(api.get("/api/v1/audit", params={"action": "approval"}))
    assert [r["what"] for r in approvals] == ["approve drain_node"]
    assert _ok(api.get("/api/v1/audit", params={"run": "r1", "limit": 2})) == trail[:2]


def test_a_rejected_run_never_happens_and_unknown_playbooks_are_refused(
    api: httpx.Client, out: Path
) -> None:
    request = {"playbook": "drain_node", "labels": {"node": "n2", "run": "r2"}}
    pending = _ok(api.post("/api/v1/actions", json=request, headers=_as(api, "operator")))
    body = {"comment": "jobs still running"}
    rejected = _ok(api.post(f"/api/v1/actions/{pending['id']}/reject", json=body))
    assert (rejected["state"], rejected["decided_by"], rejected["comment"]) == (
        "rejected",
        _actor(api, "root"),
        "jobs still running",
    )
    assert api.post(f"/api/v1/actions/{pending['id']}/approve", json={}).status_code == 409
    assert api.post("/api/v1/actions/nope/approve", json={}).status_code == 404
    by = {"by": "x"}  # who decides is the token's identity, never a field of the request
    assert api.post(f"/api/v1/actions/{pending['id']}/approve", json=by).status_code == 400
    refused = api.post("/api/v1/actions", json={**request, "playbook": "rm_rf"})
    assert refused.status_code == 403 and "allow-list" in refused.json()["error"]
    assert not out.exists()
    listed = _ok(api.get("/api/v1/actions", params={"run": "r2"}))
    assert [(a["id"], a["state"]) for a in listed] == [(pending["id"], "rejected")]
    trail = _ok(api.get("/api/v1/audit", params={"run": "r2"}))
    assert [(r["what"], r["result"]) for r in trail] == [
        ("request rm_rf", "refused"),
        ("reject drain_node", "rejected"),
        ("request drain_node", "pending"),
    ]
    assert _ok(api.get("/api/v1/playbooks"))[0]["name"] == "drain_node"


def test_a_firing_alert_of_a_listed_kind_requests_its_playbook(api: httpx.Client) -> None:
    samples = [
        {"name": "gpu.temp_c", "labels": {"run": "r3", "node": "n3", "gpu": 1}, "ts": t, "value": v}
        for t, v in ((100.0, 70.0), (101.0, 91.5))
    ]
    _ok(api.post("/api/v1/ingest", json={"source": "agent-n3", "seq": 1, "samples": samples}))
    deadline = time.monotonic() + WAIT_S
    while not (found := _ok(api.get("/api/v1/actions", params={"run": "r3"}))):
        assert time.monotonic() < deadline, api.collector.log()  # type: ignore[attr-defined]
        time.sleep(0.05)
    (action,) = found
    assert (action["playbook"], action["state"], action["requested_by"], action["kind"]) == (
        "drain_node",
        "pending",
        "alert:gpu_thermal",
        "gpu_thermal",
    )
    assert action["labels"] == {"run": "r3", "node": "n3", "gpu": "1"}
    while not (alerts := _ok(api.get("/api/v1/alerts", params={"run": "r3"}))):
        assert time.monotonic() < deadline, "the alert was not listed"
        time.sleep(0.05)
    (alert,) = alerts
    assert action["alert_id"] == alert["id"]
    (record,) = _ok(api.get("/api/v1/audit", params={"kind": "gpu_thermal"}))
    assert (record["actor"], record["result"], record["alert_id"]) == (
        "alert:gpu_thermal",
        "pending",
        alert["id"],
    )


def test_a_mistake_in_the_playbooks_file_stops_the_collector_with_its_line(
    collector_factory: Any, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("playbooks:\n  - name: fix\n    kind: command\n    argv: ls\n")
    with pytest.raises(RuntimeError) as caught:
        collector_factory(extra_args=("--playbooks", str(bad)))
    assert f"{bad}:4: playbooks[0].argv: expected a list" in str(caught.value)


def test_a_pending_action_outlives_a_restart_and_runs_once_approved(
    api: httpx.Client, out: Path
) -> None:
    request = {"playbook": "drain_node", "labels": {"node": "n5", "run": "r5"}}
    pending = _ok(api.post("/api/v1/actions", json=request, headers=_as(api, "operator")))
    api.collector.restart()  # type: ignore[attr-defined]
    assert _final(api, pending["id"])["state"] == "pending"
    _ok(api.post(f"/api/v1/actions/{pending['id']}/approve", json={}, headers=_as(api, "admin")))
    done = _final(api, pending["id"])
    assert (done["state"], done["decided_by"]) == ("ok", _actor(api, "admin-default")), done
    assert out.read_text() == "drained n5 of run r5\n"
