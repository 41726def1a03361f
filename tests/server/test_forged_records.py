"""Ingested data is never one of the collector's records: every reserved kind and the
collector's own source are refused through ingest (JSON and binary), nothing of them is stored,
a restart reads back only what the collector wrote, and no forged action runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from stepwatch.model import RECORD_KINDS
from stepwatch.wire import BINARY_CONTENT_TYPE, encode

T0 = 1_780_000_000.0
WAIT_S = 60.0

#: Each reserved kind as a forger would write it: in the collector's own shapes, so that a
#: store reading them back as records would act on them.
FORGED: dict[str, dict[str, Any]] = {
    "action": {
        "id": "f0rged0000000001", "playbook": "wipe", "labels": {"node": "n1"},
        "dry_run": False, "state": "queued", "requested_by": "admin",
        "created": T0, "updated": T0, "decided_by": "admin",
    },
    "alert": {
        "id": "f0rged0000000002", "group": "g", "rule": "forged", "kind": "forged",
        "state": "firing", "severity": "critical", "since": T0, "value": 1.0,
    },
    "alert_ack": {"id": "f0rged0000000002", "by": "admin"},
    "approval": {"id": "f0rged0000000001", "by": "admin", "result": "approved"},
    "audit": {
        "action": "approval", "actor": "admin", "result": "ok", "alert_id": "",
        "kind": "", "detail": {},
    },
    "command": {"id": 1, "run": "r1", "action": "stop", "args": {}, "by": "admin"},
    "command_ack": {"id": 1, "result": "applied"},
    "silence": {
        "id": "f0rged0000000003", "matchers": ["kind=~.*"], "starts_at": T0,
        "ends_at": T0 + 10**9, "created_by": "admin", "comment": "forged",
    },
    "silence_expired": {"id": "f0rged0000000003"},
    "rules_loaded": {"files": []},
    "rules_error": {},
}  # fmt: skip


def _playbooks(tmp: Path, marker: Path) -> Path:
    """One destructive playbook whose real run would leave ``marker`` behind."""
    script = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')"
    path = tmp / "playbooks.yaml"
    path.write_text(
        f"""\
playbooks:
  - name: wipe
    kind: command
    argv: [{json.dumps(sys.executable)}, "-c", {json.dumps(script)}]
    destructive: true
    dry_run: true
"""
    )
    return path


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def _state(api: httpx.Client) -> dict[str, Any]:
    """Everything the collector's records decide: alerts, silences, actions, audit, commands."""
    got = {
        path: _ok(api.get(path, params=params))
        for path, params in [
            ("/api/v1/alerts", {"state": "all"}),
            ("/api/v1/silences", {"all": True}),
            ("/api/v1/actions", {}),
            ("/api/v1/audit", {}),
            ("/api/v1/audit/head", {}),
            ("/api/v1/runs/r1/commands", {}),
        ]
    }
    for kind in sorted(RECORD_KINDS):
        got[kind] = _ok(api.get("/api/v1/events", params={"kind": kind}))
    return got


def _forge_json(api: httpx.Client, kind: str, seq: int) -> httpx.Response:
    event = {"ts": T0, "kind": kind, "text": "forged", "labels": {"run": "r1"}}
    doc = {"source": "trainer-r1", "seq": seq, "samples": [], "events": [event]}
    doc["events"][0]["data"] = FORGED[kind]
    return api.post("/api/v1/ingest", json=doc)


def _forge_binary(api: httpx.Client, source: str, seq: int, kinds: list[str]) -> httpx.Response:
    events = [
        {"ts": T0, "kind": k, "text": "forged", "labels": {}, "data": FORGED.get(k, {})}
        for k in kinds
    ]
    empty = np.empty(0, np.float64)
    body = encode(
        source, seq, [], empty, empty, np.empty(0, np.int64), np.empty(0, np.uint32), events
    )
    return api.post("/api/v1/ingest", content=body, headers={"content-type": BINARY_CONTENT_TYPE})


def _settled(api: httpx.Client, eventually: Any, loss_doc: Any) -> None:
    """A run, an alert, a silence and a command, so there is something to keep unchanged."""
    _ok(api.post("/api/v1/runs", json={"id": "r1", "start": T0}))
    _ok(api.post("/api/v1/ingest", json=loss_doc(1, "r1", [1.0, "NaN"], T0)))
    assert eventually(lambda: api.get("/api/v1/alerts", params={"state": "all"}).json())
    silence = {"matchers": ["node=n9"], "duration_s": 3600, "created_by": "ops"}
    _ok(api.post("/api/v1/silences", json=silence), 201)
    _ok(api.post("/api/v1/runs/r1/commands", json={"action": "checkpoint", "by": "ops"}), 201)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "wiped"


@pytest.fixture
def collector(collector_factory: Any, tmp_path: Path, marker: Path) -> Any:
    return collector_factory(extra_args=("--playbooks", str(_playbooks(tmp_path, marker))))


def test_forged_records_are_refused_and_change_nothing_across_a_restart(
    collector: Any, marker: Path, eventually: Any, loss_doc: Any
) -> None:
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
        _settled(api, eventually, loss_doc)
    collector.restart()  # what a restart changes by itself (firing alerts resolved) is done
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
        before = _state(api)
        for seq, kind in enumerate(sorted(RECORD_KINDS), start=1):
            refused = _forge_json(api, kind, seq)
            assert refused.status_code == 400, refused.text
            assert f"kind {kind!r} is reserved" in refused.json()["error"]
        refused = _forge_binary(api, "trainer-r1", 100, ["log", "action"])
        assert refused.status_code == 400 and "'action' is reserved" in refused.json()["error"]
        for source in ("stepwatch.collector", "stepwatch.anything"):
            refused = api.post(
                "/api/v1/ingest", json={"source": source, "seq": 2**62, "samples": []}
            )
            assert refused.status_code == 400, refused.text
            assert f"source {source!r} is reserved" in refused.json()["error"]
        refused = _forge_binary(api, "stepwatch.collector", 2**62, [])
        assert refused.status_code == 400 and "is reserved" in refused.json()["error"]
        log_lines = _ok(api.get("/api/v1/events", params={"kind": "log"}))
    assert log_lines == []  # the binary batch's log line was refused with its action

    collector.restart()
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
        assert _state(api) == before
        _still_writes_its_own_records(api, before, eventually)
    assert not marker.exists()


def _still_writes_its_own_records(
    api: httpx.Client, before: dict[str, Any], eventually: Any
) -> None:
    """A silence set through the API is listed; a dry run of the playbook (which the runner
    takes after anything a previous life left queued) is audited, and only it ran."""
    silence = {"matchers": ["node=n8"], "duration_s": 3600, "created_by": "ops"}
    made = _ok(api.post("/api/v1/silences", json=silence), 201)
    assert made["id"] in [s["id"] for s in _ok(api.get("/api/v1/silences"))]
    body = {"playbook": "wipe", "labels": {"node": "n1"}, "by": "ops", "dry_run": True}
    action = _ok(api.post("/api/v1/actions", json=body))
    done = eventually(lambda: _ran(api, action["id"]))
    assert (done["state"], done["dry_run"]) == ("ok", True)
    assert [a["id"] for a in _ok(api.get("/api/v1/actions"))] == [action["id"]]
    audit = _ok(api.get("/api/v1/audit"))
    assert [r["what"] for r in audit[:2]] == ["run wipe", "request wipe"]
    head = _ok(api.get("/api/v1/audit/head"))
    assert head["seq"] > before["/api/v1/audit/head"]["seq"]


def _ran(api: httpx.Client, action_id: str) -> dict[str, Any] | None:
    """The action once it has run, else None."""
    found = _ok(api.get(f"/api/v1/actions/{action_id}"))
    return dict(found) if found["state"] == "ok" else None
