"""The list routes over the store's state tables, against a real collector: every item once by
cursor (the body still a JSON list, the cursor in ``X-Next-Cursor`` and ``Link``), filters in
the query, a cursor the collector never gave refused, and the runs summary of one run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.model import Event, RecordBatch, Run
from stepwatch.store import Store

T0 = 1_780_000_000.0
SOURCE = "stepwatch.collector"


def _alert(i: int) -> Event:
    run = f"r{i % 3}"
    data = {
        "id": f"a{i:02}",
        "rule": "R",
        "kind": "gpu_hot" if i % 2 else "loss_spike",
        "severity": "critical" if i % 5 == 0 else "warning",
        "state": "resolved",
        "since": T0 + i // 2,
    }
    return Event(T0 + i // 2, "alert", "x", {"run": run}, data)


def _action(i: int) -> Event:
    state = "ok" if i % 2 else "rejected"
    data = {"id": f"x{i:02}", "playbook": "drain", "labels": {"run": "r1"}, "dry_run": True}
    data |= {"state": state, "requested_by": "ana", "created": T0 + i, "updated": T0 + i}
    return Event(T0 + i, "action", "drain", {"run": "r1"}, data)


def _audit(i: int) -> Event:
    data = {"action": "notify" if i % 2 else "command", "actor": "ana", "result": "ok"}
    return Event(T0 + i, "audit", f"did {i}", {"run": f"r{i % 3}"}, data | {"kind": "gpu_hot"})


@pytest.fixture
def api(tmp_path: Path, live_factory: Any) -> Any:
    """A collector over a store that already holds 40 alerts, 12 actions and 60 audit records
    (of runs r0, r1, r2), as a long-lived collector's would."""
    with Store(tmp_path / "seeded.duckdb") as store:
        for run in ("r0", "r1", "r2"):
            store.upsert_run(Run(run, start=T0))
        events = [_alert(i) for i in range(40)] + [_action(i) for i in range(12)]
        store.apply([RecordBatch.of(SOURCE, events + [_audit(i) for i in range(60)])])
    with httpx.Client(base_url=live_factory(store="seeded.duckdb").url, timeout=30) as client:
        yield client


def _pages(api: httpx.Client, path: str, **params: Any) -> list[list[dict[str, Any]]]:
    """Every page of a list, following the cursor in the headers."""
    pages, cursor = [], None
    while True:
        response = api.get(path, params=params | ({"cursor": cursor} if cursor else {}))
        assert response.status_code == 200, response.text
        pages.append(response.json())
        cursor = response.headers.get("X-Next-Cursor")
        if cursor is None:
            assert "Link" not in response.headers
            return pages
        assert response.headers["Link"].startswith(f"<{path}?")
        assert response.headers["Link"].endswith('>; rel="next"')


def test_alerts_page_by_cursor_and_every_one_comes_once(api: httpx.Client) -> None:
    pages = _pages(api, "/api/v1/alerts", state="all", limit=7)
    assert [len(p) for p in pages] == [7, 7, 7, 7, 7, 5]
    listed = [a["id"] for p in pages for a in p]
    assert sorted(listed) == [f"a{i:02}" for i in range(40)]
    assert [(a["ts"], a["id"]) for p in pages for a in p] == sorted(
        ((a["ts"], a["id"]) for p in pages for a in p), reverse=True
    )
    assert all(a["acked"] is False and a["state"] == "resolved" for p in pages for a in p)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"run": "r1"}, {i for i in range(40) if i % 3 == 1}),
        ({"kind": "gpu_hot"}, {i for i in range(40) if i % 2}),
        ({"severity": "critical", "run": "r0"}, {i for i in range(40) if i % 15 == 0}),
        ({"since": T0 + 5, "until": T0 + 6}, set(range(10, 14))),
        ({"state": "firing"}, set()),
    ],
)
def test_alert_filters_run_on_the_server(
    api: httpx.Client, params: dict[str, Any], expected: set[int]
) -> None:
    pages = _pages(api, "/api/v1/alerts", **({"state": "all"} | params), limit=4)
    assert {a["id"] for p in pages for a in p} == {f"a{i:02}" for i in expected}


@pytest.mark.parametrize("path", ["/api/v1/alerts", "/api/v1/actions", "/api/v1/audit"])
def test_a_cursor_the_collector_never_gave_is_a_400(api: httpx.Client, path: str) -> None:
    response = api.get(path, params={"cursor": "bm90IGEgY3Vyc29y"})
    assert response.status_code == 400
    assert "cursor" in response.json()["error"]


def test_actions_page_newest_request_first_with_a_state_filter(api: httpx.Client) -> None:
    pages = _pages(api, "/api/v1/actions", limit=5)
    assert [a["id"] for p in pages for a in p] == [f"x{i:02}" for i in range(11, -1, -1)]
    rejected = _pages(api, "/api/v1/actions", state="rejected", limit=4)
    assert [a["id"] for p in rejected for a in p] == [f"x{i:02}" for i in range(10, -1, -2)]
    one = api.get("/api/v1/actions/x03")
    assert one.status_code == 200 and one.json()["state"] == "ok"


def test_audit_pages_newest_first_with_filters(api: httpx.Client) -> None:
    pages = _pages(api, "/api/v1/audit", action="notify", run="r1", limit=3)
    wanted = [i for i in range(59, -1, -1) if i % 2 and i % 3 == 1]
    assert [r["what"] for p in pages for r in p] == [f"did {i}" for i in wanted]
    assert len(_pages(api, "/api/v1/audit", since=T0 + 50, limit=1000)[0]) == 10


def test_the_summary_of_one_run_is_that_run_only(api: httpx.Client) -> None:
    response = api.get("/api/v1/runs/summary", params={"run": "r1"})
    assert response.status_code == 200
    assert [(s["id"], s["open_alerts"]) for s in response.json()] == [("r1", 0)]
    assert api.get("/api/v1/runs/summary", params={"run": "nope"}).json() == []
