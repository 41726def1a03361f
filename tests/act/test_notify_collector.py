"""Notifications from a real collector: started with a notifications file pointing at a local
webhook, a NaN loss ingested over HTTP comes out as one webhook call, and the delivery is in
the audit trail; a silenced alert calls nobody, nor does an info alert (a telemetry gap)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.server import CollectorOptions, ServerThread

from ._notify_parts import T0, WAIT_S, Recorder, recording_server

SECRET = "collector-secret"


@pytest.fixture
def hook() -> Iterator[Recorder]:
    with recording_server() as server:
        yield server


@pytest.fixture
def collector(tmp_path: Path, hook: Recorder, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A collector in this process whose notifications go to ``hook``."""
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    notify = tmp_path / "notify.yaml"
    notify.write_text(
        "receivers:\n"
        "  - name: hook\n"
        "    type: webhook\n"
        f"    url: {hook.url}/alerts\n"
        "    secret: ${HOOK_SECRET}\n"
        "route:\n"
        "  receiver: hook\n"
        "  group_wait: 0s\n"
    )
    server = ServerThread(
        tmp_path / "store.duckdb", CollectorOptions(port=0, notify=notify)
    ).start()
    try:
        yield server.url
    finally:
        server.stop()


def test_a_nan_loss_is_one_webhook_call_and_an_audit_record(
    collector: str, hook: Recorder, loss_doc: Any, eventually: Any
) -> None:
    doc = loss_doc(1, "r1", [2.0, "NaN", "NaN"], T0)
    ingest = httpx.post(f"{collector}/api/v1/ingest", json=doc)
    assert ingest.status_code == 200, ingest.text
    (request,) = hook.wait_for(1)
    body = json.loads(request.body)
    assert request.path == "/alerts"
    assert body["status"] == "firing"
    (fired,) = body["alerts"]
    assert fired["kind"] == "nonfinite" and fired["labels"] == {"run": "r1"}
    assert fired["value"] == "NaN"
    assert fired["url"] == f"{collector}/#/alerts?run=r1&alert={fired['id']}"
    assert request.headers["X-Stepwatch-Signature"].startswith("sha256=")

    def audited() -> list[dict[str, Any]]:
        events = httpx.get(f"{collector}/api/v1/events", params={"kind": "audit"}).json()
        return [e for e in events if e["data"]["action"] == "notify"]

    (record,) = eventually(audited)
    assert record["data"]["actor"] == "hook" and record["data"]["result"] == "ok"
    assert record["data"]["alert_id"] == fired["id"]
    assert record["labels"] == {"run": "r1"}
    assert len(hook.requests) == 1  # one alert, one call


def test_a_silenced_alert_calls_nobody(
    collector: str, hook: Recorder, loss_doc: Any, eventually: Any
) -> None:
    silence = {"matchers": ["run=r1"], "duration_s": 3600, "comment": "known"}
    assert httpx.post(f"{collector}/api/v1/silences", json=silence).status_code in (200, 201)
    httpx.post(f"{collector}/api/v1/ingest", json=loss_doc(1, "r1", [2.0, "NaN"], T0))
    httpx.post(f"{collector}/api/v1/ingest", json=loss_doc(1, "r2", [2.0, "NaN"], T0))
    (request,) = hook.wait_for(1)
    assert [a["labels"]["run"] for a in json.loads(request.body)["alerts"]] == ["r2"]

    def alerts() -> list[dict[str, Any]]:
        found = httpx.get(f"{collector}/api/v1/alerts").json()
        return found if len(found) == 2 else []

    assert len(eventually(alerts)) == 2  # both fired; only the unsilenced one was sent
    assert len(hook.wait_for(2, timeout=1.0)) == 1


def _agent_pause_doc(run: str) -> dict[str, Any]:
    """Two nodes for five minutes, each an agent (host.cpu_pct every 5 s) and a rank stepping
    every second; node1's agent is silent from 100 s to 190 s while its rank trains on."""
    samples = []
    for t in range(300):
        for node in (0, 1):
            labels = {"run": run, "node": f"node{node}"}
            step = {"name": "train.step_time_s", "labels": {**labels, "rank": str(node)}}
            samples.append({**step, "step": t, "ts": T0 + t + 0.5, "value": 1.0})
            if t % 5 == 0 and not (node == 1 and 100 <= t < 190):
                cpu = {"name": "host.cpu_pct", "labels": labels, "value": 30.0}
                samples.append({**cpu, "ts": T0 + t})
    return {"source": f"job-{run}", "seq": 1, "samples": samples}


def test_a_telemetry_gap_is_listed_but_calls_nobody(
    collector: str, hook: Recorder, loss_doc: Any, eventually: Any
) -> None:
    assert httpx.post(f"{collector}/api/v1/ingest", json=_agent_pause_doc("r1")).status_code == 200

    def listed(kind: str) -> list[dict[str, Any]]:
        params = {"kind": kind, "state": "all"}
        return httpx.get(f"{collector}/api/v1/alerts", params=params).json()

    (gap,) = eventually(lambda: listed("telemetry_gap"))
    assert gap["severity"] == "info" and gap["state"] == "resolved"
    assert gap["labels"] == {"run": "r1", "node": "node1", "producer": "agent"}
    assert not listed("node_down")
    httpx.post(f"{collector}/api/v1/ingest", json=loss_doc(1, "r2", [2.0, "NaN"], T0))
    (request,) = hook.wait_for(1)  # what was sent after the gap: the NaN loss alone
    assert [a["kind"] for a in json.loads(request.body)["alerts"]] == ["nonfinite"]
    assert len(hook.wait_for(2, timeout=1.0)) == 1


def test_a_route_matches_the_project_of_the_alerts_run(
    tmp_path: Path, hook: Recorder, loss_doc: Any
) -> None:
    notify = tmp_path / "notify.yaml"
    notify.write_text(
        "receivers:\n"
        "  - {name: team, type: webhook, url: " + hook.url + "/team}\n"
        "  - {name: rest, type: webhook, url: " + hook.url + "/rest}\n"
        "route:\n"
        "  receiver: rest\n"
        "  group_wait: 0s\n"
        "  routes:\n"
        "    - {matchers: [project=team], receiver: team, group_wait: 0s}\n"
    )
    with ServerThread(tmp_path / "store.duckdb", CollectorOptions(port=0, notify=notify)) as server:
        for run, project in (("r1", "team"), ("r2", "default")):
            made = httpx.post(f"{server.url}/api/v1/runs", json={"id": run, "project": project})
            assert made.status_code == 200, made.text
        forged = loss_doc(1, "r2", [2.0, "NaN"], T0)
        for sample in forged["samples"]:
            sample["labels"]["project"] = "team"  # a label the data carries routes nothing
        httpx.post(f"{server.url}/api/v1/ingest", json=loss_doc(1, "r1", [2.0, "NaN"], T0))
        httpx.post(f"{server.url}/api/v1/ingest", json=forged)
        sent = hook.wait_for(2)
    got = {r.path: [a["labels"] for a in json.loads(r.body)["alerts"]] for r in sent}
    assert got == {
        "/team": [{"run": "r1", "project": "team"}],
        "/rest": [{"run": "r2", "project": "default"}],
    }


BAD = "receivers:\n  - name: x\n    type: pager\nroute: {receiver: x}\n"
BAD_AT = "receivers[0].type: unknown receiver type 'pager'"


def test_a_mistake_in_the_file_stops_the_collector_before_it_opens(tmp_path: Path) -> None:
    notify = tmp_path / "notify.yaml"
    notify.write_text(BAD)
    store = tmp_path / "store.duckdb"
    args = ["--store", str(store), "--port", "0", "--notify", str(notify)]
    done = subprocess.run(
        [sys.executable, "-m", "stepwatch.server", *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode != 0
    assert f"{notify}:3: {BAD_AT}" in done.stderr
    result = CliRunner().invoke(main, ["server", *args])
    assert result.exit_code != 0
    assert f"{notify}:3: {BAD_AT}" in result.output
    assert not store.exists()


def test_finishing_a_run_resolves_its_alerts_and_notifies_the_resolution(
    tmp_path: Path, hook: Recorder, collector_factory: Any, loss_doc: Any, eventually: Any
) -> None:
    notify = tmp_path / "notify.yaml"
    notify.write_text(
        "receivers:\n"
        "  - {name: hook, type: webhook, url: '" + hook.url + "/alerts'}\n"
        "route: {receiver: hook, group_wait: 0s, group_interval: 1s}\n"
    )
    server = collector_factory(extra_args=("--notify", str(notify)))
    assert httpx.post(f"{server.url}/api/v1/runs", json={"id": "r1"}).status_code == 200
    doc = loss_doc(1, "r1", [2.0, "NaN", "NaN"], T0)  # still NaN: nothing in the data resolves it
    assert httpx.post(f"{server.url}/api/v1/ingest", json=doc).status_code == 200
    (fired,) = hook.wait_for(1)
    assert json.loads(fired.body)["status"] == "firing"
    finish = {"status": "finished", "end": T0 + 10}
    assert httpx.post(f"{server.url}/api/v1/runs/r1/finish", json=finish).status_code == 200
    assert httpx.get(f"{server.url}/api/v1/alerts", params={"run": "r1"}).json() == []
    (listed,) = httpx.get(f"{server.url}/api/v1/alerts", params={"state": "resolved"}).json()
    assert (listed["kind"], listed["ts"], listed["reason"]) == (
        "nonfinite",
        T0 + 10,
        "run finished",
    )
    shown = CliRunner().invoke(main, ["alerts", "--server", server.url, "--state", "firing"])
    assert shown.exit_code == 0 and "nonfinite" not in shown.output
    resolved = json.loads(hook.wait_for(2)[-1].body)
    assert resolved["status"] == "resolved"
    assert [a["id"] for a in resolved["alerts"]] == [listed["id"]]
