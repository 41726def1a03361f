"""Runs API: create (with or without id), update the fields given, list with filters, finish."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

JSON = {"Content-Type": "application/json"}


def test_create_get_and_update_keep_unsent_fields(client: httpx.Client) -> None:
    run = {
        "id": "r1",
        "project": "llm",
        "name": "7b",
        "config": {"lr": 3e-4, "nan": float("nan")},
        "start": 100.0,
        "labels": {"team": "a"},
        "planned_total_steps": 1000,
    }
    created = client.post("/api/v1/runs", content=json.dumps(run), headers=JSON)
    assert created.status_code == 200
    assert created.json() == {
        "id": "r1",
        "project": "llm",
        "name": "7b",
        "config": {"lr": 3e-4, "nan": "NaN"},
        "status": "running",
        "start": 100.0,
        "end": None,
        "labels": {"team": "a"},
        "planned_total_steps": 1000,
    }
    updated = client.post("/api/v1/runs", json={"id": "r1", "name": "7b-retry"}).json()
    assert updated == {**created.json(), "name": "7b-retry"}
    assert client.get("/api/v1/runs/r1").json() == updated


def test_another_rank_registering_erases_nothing(client: httpx.Client) -> None:
    first = {"id": "r2", "name": "7b", "config": {"lr": 1e-3}, "start": 100.0}
    client.post("/api/v1/runs", json=first)
    late = client.post("/api/v1/runs", json={"id": "r2", "name": "", "config": {}, "start": 105.0})
    assert (late.json()["name"], late.json()["config"], late.json()["start"]) == (
        "7b",
        {"lr": 1e-3},
        100.0,
    )


def test_a_run_without_id_gets_one_and_a_start(client: httpx.Client) -> None:
    run = client.post("/api/v1/runs", json={"project": "p"}).json()
    assert len(run["id"]) >= 16 and run["start"] > 0
    assert client.get(f"/api/v1/runs/{run['id']}").json()["project"] == "p"


def test_list_filters_by_project_and_status(client: httpx.Client) -> None:
    for rid, project in (("a", "p1"), ("b", "p1"), ("c", "p2")):
        client.post("/api/v1/runs", json={"id": rid, "project": project, "start": 1.0})
    client.post("/api/v1/runs/b/finish", json={"status": "failed", "end": 5.0})
    ids = lambda **p: sorted(r["id"] for r in client.get("/api/v1/runs", params=p).json())  # noqa: E731
    assert ids() == ["a", "b", "c"]
    assert ids(project="p1") == ["a", "b"]
    assert ids(project="p1", status="running") == ["a"]
    assert ids(status="failed") == ["b"]


def test_finish_sets_status_and_end(client: httpx.Client) -> None:
    client.post("/api/v1/runs", json={"id": "r", "start": 1.0})
    done = client.post("/api/v1/runs/r/finish", json={"status": "finished", "end": 9.5}).json()
    assert (done["status"], done["end"]) == ("finished", 9.5)
    killed = client.post("/api/v1/runs/r/finish", json={"status": "killed"}).json()
    assert killed["status"] == "killed" and killed["end"] > 9.5


def test_finish_resolves_the_run_s_alerts_and_no_other_run_s(
    client: httpx.Client, eventually: Any, loss_doc: Any
) -> None:
    for seq, run in enumerate(("r", "other"), start=1):
        client.post("/api/v1/runs", json={"id": run, "start": 1.0})
        doc = loss_doc(seq, run, [1.0, "NaN"], 1.0)
        assert client.post("/api/v1/ingest", json=doc).status_code == 200
    assert eventually(
        lambda: len(client.get("/api/v1/alerts", params={"state": "firing"}).json()) == 2
    )
    client.post("/api/v1/runs/r/finish", json={"status": "failed", "end": 9.5})
    firing = client.get("/api/v1/alerts", params={"state": "firing"}).json()
    assert [a["labels"]["run"] for a in firing] == ["other"]
    (ended,) = client.get("/api/v1/alerts", params={"state": "resolved"}).json()
    assert (ended["rule"], ended["ts"], ended["reason"]) == ("nonfinite_loss", 9.5, "run finished")
    assert ended["labels"] == {"run": "r"}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("GET", "/api/v1/runs/nope", None, 404, "unknown run 'nope'"),
        ("POST", "/api/v1/runs/nope/finish", {"status": "finished"}, 404, "unknown run 'nope'"),
        ("POST", "/api/v1/runs/r/finish", {"status": "running"}, 400, "status"),
        ("POST", "/api/v1/runs/r/finish", {}, 400, "status: Field required"),
        ("POST", "/api/v1/runs", {"id": "x", "status": "paused"}, 400, "status must be one of"),
        ("POST", "/api/v1/runs", {"id": "x", "start": "soon"}, 400, "start:"),
        ("POST", "/api/v1/runs", {"id": "x", "config": [1]}, 400, "config:"),
        ("POST", "/api/v1/runs", {"id": "a/b"}, 400, "id:"),
        ("POST", "/api/v1/runs", {"id": "x", "colour": "red"}, 400, "colour: Extra inputs"),
        ("POST", "/api/v1/runs", {"id": "x", "planned_total_steps": -1}, 400, "planned_total"),
        # beyond the store's 64-bit columns and times: refused, not a server error
        ("POST", "/api/v1/runs", {"id": "x", "planned_total_steps": 2**64}, 400, "planned_total"),
        ("POST", "/api/v1/runs", {"id": "x", "start": 1e300}, 400, "start: Input should be"),
        ("POST", "/api/v1/runs/r/finish", {"status": "failed", "end": -1e300}, 400, "end:"),
        ("POST", "/api/v1/runs", None, 400, "Field required"),
    ],
)
def test_bad_requests_say_what_is_wrong(
    client: httpx.Client, method: str, path: str, body: object, status: int, message: str
) -> None:
    client.post("/api/v1/runs", json={"id": "r", "start": 1.0})
    response = client.request(method, path, json=body)
    assert response.status_code == status
    assert message in response.json()["error"]
    assert client.get("/api/v1/runs/x").status_code == 404
