"""`stepwatch actions` and `stepwatch audit` against a real collector started with --playbooks
and a token: request, list, approve, reject, and the audit trail of each step."""

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

TOKEN = "s3cret"
WRITE_ARGS = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"


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
    return collector_factory(token=TOKEN, extra_args=("--playbooks", str(playbooks)))


def _client(collector: Any, *args: str) -> Result:
    return _cli(*args, "--server", collector.url, "--token", TOKEN)


def _requested(result: Result) -> str:
    assert result.exit_code == 0, result.output
    match = re.match(r"action ([0-9a-f]{16}) pending: ", result.output)
    assert match, result.output
    return match.group(1)


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
        _client(collector, "actions", "run", "cordon", "node=n2", "run=r1", "--by", "dave")
    )
    listed = _client(collector, "actions", "list", "--state", "pending")
    assert listed.exit_code == 0, listed.output
    assert "2 actions" in listed.output and first in listed.output and second in listed.output

    approved = _client(collector, "actions", "approve", first, "--by", "bob")
    assert approved.exit_code == 0 and f"action {first} queued by bob" in approved.output
    assert _state(collector, first)["state"] == "ok"
    assert json.loads(out.read_text()) == ["cordon", "n1"]
    rejected = _client(collector, "actions", "reject", second, "--by", "carol", "--comment", "no")
    assert rejected.exit_code == 0 and f"action {second} rejected by carol" in rejected.output
    assert _state(collector, second)["state"] == "rejected"
    assert json.loads(out.read_text()) == ["cordon", "n1"]  # the rejected one never ran

    twice = _client(collector, "actions", "approve", second, "--by", "bob")
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


def test_a_playbook_outside_the_allow_list_is_refused_by_the_cli(collector: Any) -> None:
    result = _client(collector, "actions", "run", "reboot_all", "node=n1")
    assert result.exit_code == 1
    assert "HTTP 403" in result.output and "not in the allow-list" in result.output
    bad = _client(collector, "actions", "run", "cordon", "n1")
    assert bad.exit_code == 2 and "key=value" in bad.output
