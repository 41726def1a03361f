"""`stepwatch actions` and `stepwatch audit` against a real collector started with --playbooks
and tokens: request, list, approve (by another admin), reject, and the audit trail of each step."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from stepwatch.cli import main

WRITE_ARGS = (
    "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:])); "
    "print('cordoned', sys.argv[3]); print('careful', file=sys.stderr)"
)


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out.json"


@pytest.fixture
def collector(collector_factory: Any, tmp_path: Path, out: Path) -> Any:
    argv = json.dumps([sys.executable, "-c", WRITE_ARGS, str(out), "cordon", "{node}"])
    playbooks = tmp_path / "playbooks.yaml"
    playbooks.write_text(
        f"playbooks:\n  - name: cordon\n    kind: command\n    argv: {argv}\n    dry_run: false\n"
    )
    collector = collector_factory(auth=True, extra_args=("--playbooks", str(playbooks)))
    run = {"id": "r1", "project": "default"}
    assert httpx.post(f"{collector.url}/api/v1/runs", json=run, headers=collector.headers)
    return collector


def _client(collector: Any, *args: str, role: str | None = None) -> Result:
    """The command as the admin of every project, or as the ``role`` token of ``default``."""
    token = collector.token if role is None else collector.tokens[role, "default"]
    return _cli(*args, "--server", collector.url, "--token", token)


def _actor(collector: Any, name: str) -> str:
    """How audit records name the token called ``name``."""
    tokens = httpx.get(f"{collector.url}/api/v1/tokens", headers=collector.headers).json()
    (token,) = [t for t in tokens if t["name"] == name]
    return f"{name} ({token['id']})"


def _requested(result: Result) -> str:
    assert result.exit_code == 0, result.output
    match = re.match(r"action ([0-9a-f]{16}) pending: ", result.output)
    assert match, result.output
    return match.group(1)


def _cells(row: str) -> list[str]:
    """The cells of one line of a table."""
    return [cell.strip() for cell in row.split("│")[1:-1]]


def _state(collector: Any, action_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        url = f"{collector.url}/api/v1/actions/{action_id}"
        action = httpx.get(url, headers=collector.headers).json()
        if action["state"] not in ("queued", "running") or time.monotonic() > deadline:
            return dict(action)
        time.sleep(0.05)


def test_approve_and_reject_from_the_command_line(collector: Any, out: Path) -> None:
    first = _requested(_client(collector, "actions", "run", "cordon", "node=n1", "run=r1"))
    second = _requested(
        _client(collector, "actions", "run", "cordon", "node=n2", "run=r1", role="operator")
    )
    listed = _client(collector, "actions", "list", "--state", "pending")
    assert listed.exit_code == 0, listed.output
    assert "2 actions" in listed.output and first in listed.output and second in listed.output

    own = _client(collector, "actions", "approve", first)  # its requester
    assert own.exit_code == 1 and "another identity must approve it" in own.output
    bob, carol = _actor(collector, "admin-default"), _actor(collector, "operator-default")
    approved = _client(collector, "actions", "approve", first, role="admin")
    assert approved.exit_code == 0 and f"action {first} queued by {bob}" in approved.output
    assert _state(collector, first)["state"] == "ok"
    assert json.loads(out.read_text()) == ["cordon", "n1"]
    rejected = _client(collector, "actions", "reject", second, "--comment", "no", role="operator")
    assert rejected.exit_code == 0 and f"action {second} rejected by {carol}" in rejected.output
    assert _state(collector, second)["state"] == "rejected"
    assert json.loads(out.read_text()) == ["cordon", "n1"]  # the rejected one never ran

    twice = _client(collector, "actions", "approve", second, role="admin")
    assert twice.exit_code == 1 and "HTTP 409" in twice.output and "not pending" in twice.output
    done = _client(collector, "actions", "list", "--run", "r1")
    assert "ok, exit 0" in done.output and "rejected" in done.output

    trail = _client(collector, "audit", "--run", "r1")
    assert trail.exit_code == 0, trail.output
    rows = [line for line in trail.output.splitlines() if "cordon" in line]
    whats = [re.search(r"(request|approve|reject|run) cordon", row).group(0) for row in rows]  # type: ignore[union-attr]
    assert whats == [
        "reject cordon",
        "run cordon",
        "approve cordon",
        "request cordon",
        "request cordon",
    ]
    approvals = _client(collector, "audit", "--action", "approval")
    assert "5 audit records" in trail.output and "2 audit records" in approvals.output
    assert "playbook" not in approvals.output
    (row,) = [line for line in approvals.output.splitlines() if "reject cordon" in line]
    assert _cells(row)[1:] == [
        "approval",
        carol,
        "reject cordon",
        "rejected",
        "node=n2 run=r1",
        "no",
    ]


def test_actions_show_tells_the_whole_story(collector: Any) -> None:
    first = _requested(_client(collector, "actions", "run", "cordon", "node=n1", "run=r1"))
    pending = _client(collector, "actions", "show", first)
    assert pending.exit_code == 0, pending.output
    lines = pending.output.splitlines()
    assert lines[0] == f"action {first}: cordon on node=n1 run=r1"
    assert lines[1] == "state:     pending"
    assert lines[2].startswith("command:   ") and lines[2].endswith(" cordon n1")
    root = re.escape(_actor(collector, "root"))
    assert re.fullmatch(rf"requested: by {root}, .+ \((now|\d+s ago)\)", lines[3])
    assert lines[4] == f"decided:   not yet: stepwatch actions approve {first} (or reject)"
    assert lines[-2:] == ["stdout: (nothing)", "stderr: (nothing)"]

    _client(collector, "actions", "approve", first, "--comment", "drain first", role="admin")
    assert _state(collector, first)["state"] == "ok"
    done = _client(collector, "actions", "show", first).output.splitlines()
    assert re.fullmatch(r"state:     ok, exit 0 after \d+\.\d\d s", done[1]), done[1]
    assert done[4] == f"decided:   by {_actor(collector, 'admin-default')}: drain first"
    assert done[-4:] == ["stdout, its end:", "  cordoned n1", "stderr, its end:", "  careful"]
    unknown = _client(collector, "actions", "show", "0123456789abcdef")
    assert unknown.exit_code == 1
    assert unknown.output == (
        "Error: GET /api/v1/actions/0123456789abcdef: HTTP 404: unknown action '0123456789abcdef'\n"
    )


def test_actions_and_audit_as_json_are_the_apis_objects(collector: Any) -> None:
    first = _requested(_client(collector, "actions", "run", "cordon", "node=n1", "run=r1"))
    listed = _client(collector, "actions", "list", "--json")
    assert listed.exit_code == 0, listed.output
    api = httpx.get(f"{collector.url}/api/v1/actions", headers=collector.headers).json()
    assert json.loads(listed.output) == api and [a["id"] for a in api] == [first]
    trail = _client(collector, "audit", "--json")
    assert trail.exit_code == 0, trail.output
    records = httpx.get(f"{collector.url}/api/v1/audit", headers=collector.headers).json()
    assert json.loads(trail.output) == records
    assert [(r["what"], r["result"]) for r in records] == [("request cordon", "pending")]


def test_audit_refuses_an_unknown_action_kind_naming_the_known_ones(collector: Any) -> None:
    result = _client(collector, "audit", "--action", "approvals")
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "Error: Invalid value for --action: 'approvals' is not one of notify, command, "
        "approval, playbook, policy"
    )


def test_a_playbook_outside_the_allow_list_is_refused_by_the_cli(collector: Any) -> None:
    result = _client(collector, "actions", "run", "reboot_all", "node=n1")
    assert result.exit_code == 1
    assert "HTTP 403" in result.output and "not in the allow-list" in result.output
    bad = _client(collector, "actions", "run", "cordon", "n1")
    assert bad.exit_code == 2 and "key=value" in bad.output
    trail = _client(collector, "audit")
    (row,) = [line for line in trail.output.splitlines() if "reboot_all" in line]
    assert _cells(row)[4:] == [
        "refused",
        "node=n1",
        "playbook 'reboot_all' is not in the allow-list",
    ]
