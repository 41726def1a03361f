"""Projects are tenants: a token of project ``default`` reads, streams, writes, silences and
approves only what belongs to ``default``; data of no run is for tokens of every project; a
destructive playbook waits for ``approvals`` admins other than its requester."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import httpx
import pytest

from stepwatch.cli._tables import action_text

OWN, OTHER = "default", "other"
WAIT_S = 30.0
T0 = 1_780_000_000.0

PLAYBOOKS = """\
playbooks:
  - name: cordon
    kind: command
    argv: [{python}, -c, "pass", "{{node}}"]
    destructive: true
    dry_run: false
    approvals: 2
"""


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def _doc(run: str | None, seq: int, values: list[Any], source: str | None = None) -> Any:
    labels = {"run": run} if run else {"node": "n9"}
    samples = [
        {"name": "loss", "labels": labels, "step": i, "ts": T0 + seq * 10 + i, "value": v}
        for i, v in enumerate(values)
    ]
    log = {"ts": T0 + seq, "kind": "log", "text": f"line of {run}", "labels": labels}
    return {"source": source or f"src-{run}", "seq": seq, "samples": samples, "events": [log]}


class Tenants:
    """One collector with a run (data, a log line, an alert, a command) in each project."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector
        self.root = httpx.Client(base_url=collector.url, headers=collector.headers, timeout=WAIT_S)
        self.runs = {OWN: "run-own", OTHER: "run-other"}
        for project, run in self.runs.items():
            _ok(self.root.post("/api/v1/runs", json={"id": run, "project": project}))
            _ok(self.root.post("/api/v1/ingest", json=_doc(run, 1, [1.0, "NaN"])))
            command = {"action": "checkpoint"}
            _ok(self.root.post(f"/api/v1/runs/{run}/commands", json=command), 201)
        _ok(self.root.post("/api/v1/ingest", json=_doc(None, 1, [1.0], source="agent-n9")))
        deadline = time.monotonic() + WAIT_S
        while len(_ok(self.root.get("/api/v1/alerts"))) < 2:
            assert time.monotonic() < deadline, "the alerts were not raised"
            time.sleep(0.05)

    def as_(self, role: str, project: str = OWN) -> httpx.Client:
        headers = self.collector.headers_of(role, project)
        return httpx.Client(base_url=self.collector.url, headers=headers, timeout=WAIT_S)


@pytest.fixture(scope="module")
def tenants(module_collector_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    playbooks = tmp_path_factory.mktemp("tenancy") / "playbooks.yaml"
    playbooks.write_text(PLAYBOOKS.format(python=sys.executable))
    collector = module_collector_factory(auth=True, extra_args=("--playbooks", str(playbooks)))
    made = Tenants(collector)
    yield made
    made.root.close()


def _runs_in(found: list[dict[str, Any]], *keys: str) -> set[str | None]:
    """The run each listed item is about (under ``keys``: ``labels``, ``run``...)."""
    out: set[str | None] = set()
    for item in found:
        value: Any = item
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        out.add(value)
    return out


LISTS = [
    ("/api/v1/runs", {}, ("id",)),
    ("/api/v1/runs/summary", {}, ("id",)),
    ("/api/v1/alerts", {}, ("labels", "run")),
    ("/api/v1/logs", {}, ("labels", "run")),
    ("/api/v1/events", {}, ("labels", "run")),
    ("/api/v1/audit", {}, ("labels", "run")),
    ("/api/v1/series", {}, ("labels", "run")),
    ("/api/v1/query/latest", {}, ("labels", "run")),
    ("/api/v1/query/percentiles", {"name": "loss", "by": "run"}, ("labels", "run")),
]


@pytest.mark.parametrize(("path", "params", "keys"), LISTS)
def test_lists_hold_only_the_callers_projects(
    tenants: Tenants, path: str, params: dict[str, str], keys: tuple[str, ...]
) -> None:
    with tenants.as_("viewer") as viewer:
        assert _runs_in(_ok(viewer.get(path, params=params)), *keys) == {"run-own"}
        if path != "/api/v1/runs":  # another project's run is as unknown: nothing matches
            assert _ok(viewer.get(path, params={**params, "run": "run-other"})) == []
    seen_by_all = _runs_in(_ok(tenants.root.get(path, params=params)), *keys)
    assert {"run-own", "run-other"} <= seen_by_all


def test_many_series_queries_and_groups_hold_only_the_callers_runs(tenants: Tenants) -> None:
    with tenants.as_("viewer") as viewer:
        multi = _ok(viewer.get("/api/v1/query/multi", params={"start": T0, "end": T0 + 100}))
        assert {s["labels"].get("run") for s in multi["series"]} == {"run-own"}
        (group,) = _ok(viewer.get("/api/v1/alerts/groups", params={"by": "run"}))
        assert group["labels"] == {"run": "run-own"}
        other = _ok(viewer.get("/api/v1/runs/summary", params={"project": OTHER}))
        assert other == []


def test_data_of_no_run_is_for_tokens_of_every_project(tenants: Tenants) -> None:
    host = {"name": "loss", "label": "node:n9"}
    assert len(_ok(tenants.root.get("/api/v1/series", params=host))) == 1
    with tenants.as_("viewer") as viewer:
        assert _ok(viewer.get("/api/v1/series", params=host)) == []
        logs = _ok(viewer.get("/api/v1/logs", params={"node": "n9"}))
        assert logs == []
    assert len(_ok(tenants.root.get("/api/v1/logs", params={"node": "n9"}))) == 1


def _first_frame(
    url: str, headers: dict[str, str], opened: threading.Event, wanted: str = "data"
) -> Any:
    with httpx.stream("GET", url, headers=headers, timeout=WAIT_S) as response:
        assert response.status_code == 200
        kind = None
        for line in response.iter_lines():
            if line == ": connected":
                opened.set()
            elif line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: ") and kind == wanted:
                return json.loads(line[len("data: ") :])
    return None


def test_the_live_stream_tells_only_of_the_callers_runs(tenants: Tenants) -> None:
    got: list[Any] = []
    opened = threading.Event()
    headers = tenants.collector.headers_of("viewer")
    url = f"{tenants.collector.url}/api/v1/stream"
    reader = threading.Thread(target=lambda: got.append(_first_frame(url, headers, opened)))
    reader.start()
    assert opened.wait(WAIT_S)
    _ok(tenants.root.post("/api/v1/ingest", json=_doc("run-other", 2, [2.0])))
    _ok(tenants.root.post("/api/v1/ingest", json=_doc(None, 2, [2.0], source="agent-n9")))
    _ok(tenants.root.post("/api/v1/ingest", json=_doc("run-own", 2, [2.0])))
    reader.join(WAIT_S)
    assert not reader.is_alive() and got[0]["run"] == "run-own"


def test_the_alert_stream_tells_only_of_the_callers_alerts(tenants: Tenants) -> None:
    got: list[Any] = []
    opened = threading.Event()
    headers = tenants.collector.headers_of("viewer")
    url = f"{tenants.collector.url}/api/v1/alerts/stream"
    reader = threading.Thread(
        target=lambda: got.append(_first_frame(url, headers, opened, "alert"))
    )
    reader.start()
    assert opened.wait(WAIT_S)
    for project in (OTHER, OWN):
        run = f"streamed-{project}"
        _ok(tenants.root.post("/api/v1/runs", json={"id": run, "project": project}))
        _ok(tenants.root.post("/api/v1/ingest", json=_doc(run, 1, [1.0, "NaN"])))
    reader.join(WAIT_S)
    assert not reader.is_alive() and got[0]["labels"]["run"] == "streamed-default"


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ("run-other", "may not write run 'run-other'"),
        ("never-registered", "may not write run 'never-registered'"),
        (None, "writes only data with a run of its projects"),
    ],
)
def test_an_ingest_token_writes_only_its_projects_runs(
    tenants: Tenants, run: str | None, message: str
) -> None:
    before = len(_ok(tenants.root.get("/api/v1/series")))
    with tenants.as_("ingest") as ingest:
        refused = ingest.post("/api/v1/ingest", json=_doc(run, 1, [5.0], source=f"forge-{run}"))
        assert refused.status_code == 403 and message in refused.json()["error"]
        assert len(_ok(tenants.root.get("/api/v1/series"))) == before  # nothing stored
        mine = _doc("run-own", 1, [1.0], source=f"ok-{run}")
        assert _ok(ingest.post("/api/v1/ingest", json=mine))["applied"]


def test_a_run_is_made_in_the_callers_project_and_never_moves(tenants: Tenants) -> None:
    with tenants.as_("ingest") as ingest:
        made = _ok(ingest.post("/api/v1/runs", json={"id": "fresh-own"}))
        assert made["project"] == OWN  # a token of one project makes its runs there
        refused = ingest.post("/api/v1/runs", json={"id": "fresh-2", "project": OTHER})
        assert refused.status_code == 403 and "project 'other'" in refused.json()["error"]
        taken = ingest.post("/api/v1/runs", json={"id": "run-other"})
        assert taken.status_code == 409 and "taken" in taken.json()["error"]
        moved = ingest.post("/api/v1/runs", json={"id": "fresh-own", "project": OTHER})
        assert moved.status_code == 409 and "cannot move" in moved.json()["error"]
    assert _ok(tenants.root.get("/api/v1/runs/run-other"))["project"] == OTHER


def test_a_projects_silence_mutes_only_that_projects_alerts(tenants: Tenants) -> None:
    with tenants.as_("operator") as operator:
        body = {"matchers": ["kind=~.+"], "duration_s": 60}
        made = _ok(operator.post("/api/v1/silences", json=body), 201)
        assert made["matchers"] == ["kind=~.+", "project=default"]
        wider = {"matchers": ["project=~.*"], "duration_s": 60}
        refused = operator.post("/api/v1/silences", json=wider)
        assert refused.status_code == 403 and "its projects" in refused.json()["error"]
        for run in tenants.runs.values():  # firing now, whatever the tests before did
            _ok(tenants.root.post("/api/v1/ingest", json=_doc(run, 9, ["NaN"], f"nan-{run}")))
        silenced = {}
        deadline = time.monotonic() + WAIT_S
        while len(silenced) < 2:
            assert time.monotonic() < deadline, "the alerts did not fire again"
            alerts = _ok(tenants.root.get("/api/v1/alerts", params={"state": "firing"}))
            silenced = {
                a["labels"]["run"]: a["silenced"]
                for a in alerts
                if a["labels"]["run"] in tenants.runs.values()
            }
        assert silenced == {"run-own": True, "run-other": False}
        with tenants.as_("viewer", OTHER) as stranger:
            assert _ok(stranger.get("/api/v1/silences")) == []
            gone = stranger.delete(f"/api/v1/silences/{made['id']}")
            assert gone.status_code == 403  # a viewer may not; an operator of other: 404
        with tenants.as_("operator", OTHER) as stranger:
            gone = stranger.delete(f"/api/v1/silences/{made['id']}")
            assert gone.status_code == 404
        assert _ok(operator.delete(f"/api/v1/silences/{made['id']}"))["active"] is False


def _actor(tenants: Tenants, name: str) -> str:
    (token,) = [t for t in _ok(tenants.root.get("/api/v1/tokens")) if t["name"] == name]
    return f"{name} ({token['id']})"


def test_a_destructive_playbook_needs_its_approvals_from_other_admins(tenants: Tenants) -> None:
    request = {"playbook": "cordon", "labels": {"run": "run-own", "node": "n1"}}
    with tenants.as_("admin") as admin:
        action = _ok(admin.post("/api/v1/actions", json=request))
        path = f"/api/v1/actions/{action['id']}/approve"
        own = admin.post(path, json={})
        assert own.status_code == 403 and "another identity" in own.json()["error"]
        with tenants.as_("operator") as operator:
            assert operator.post(path, json={}).status_code == 403  # not an admin
        first = _ok(tenants.root.post(path, json={}))
        assert (first["state"], first["approvals"]) == ("pending", [_actor(tenants, "root")])
        assert f"approved so far by {_actor(tenants, 'root')}" in action_text(first)
        again = tenants.root.post(path, json={})
        assert again.status_code == 409 and "already" in again.json()["error"]
    with tenants.as_("admin", OTHER) as stranger:
        assert stranger.post(path, json={}).status_code == 404
    results = [
        r["result"]
        for r in _ok(tenants.root.get("/api/v1/audit", params={"action": "approval"}))
        if r["detail"].get("action_id") == action["id"]
    ]
    assert results == ["approved 1 of 2"]
    made = _ok(tenants.root.post("/api/v1/tokens", json={"role": "admin", "projects": [OWN]}), 201)
    second = {"Authorization": f"Bearer {made['token']}"}
    done = _ok(tenants.root.post(path, json={}, headers=second))
    assert done["state"] == "queued" and len(done["approvals"]) == 2


def test_a_request_naming_no_run_is_for_operators_of_every_project(tenants: Tenants) -> None:
    request = {"playbook": "cordon", "labels": {"node": "n1"}, "dry_run": True}
    with tenants.as_("operator") as operator:
        refused = operator.post("/api/v1/actions", json=request)
        assert refused.status_code == 403 and "labels.run" in refused.json()["error"]
        other = {**request, "labels": {"node": "n1", "run": "run-other"}}
        assert operator.post("/api/v1/actions", json=other).status_code == 404
    assert _ok(tenants.root.post("/api/v1/actions", json=request))["state"] == "queued"


def test_an_admin_of_one_project_administers_only_its_tokens(tenants: Tenants) -> None:
    with tenants.as_("admin") as admin:
        names = {t["name"] for t in _ok(admin.get("/api/v1/tokens"))}
        assert "viewer-default" in names and not names & {"viewer-other", "root"}
        wider = admin.post("/api/v1/tokens", json={"role": "admin", "projects": ["*"]})
        assert wider.status_code == 403
        assert admin.delete("/api/v1/tokens/viewer-other").status_code == 404


def test_without_auth_nothing_can_be_approved(collector_factory: Any, tmp_path: Any) -> None:
    playbooks = tmp_path / "playbooks.yaml"
    playbooks.write_text(PLAYBOOKS.format(python=sys.executable))
    collector = collector_factory(extra_args=("--playbooks", str(playbooks)))
    request = {"playbook": "cordon", "labels": {"run": "r1", "node": "n1"}}
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
        action = _ok(api.post("/api/v1/actions", json=request))
        refused = api.post(f"/api/v1/actions/{action['id']}/approve", json={})
        assert refused.status_code == 403 and "--auth" in refused.json()["error"]
        assert _ok(api.get(f"/api/v1/actions/{action['id']}"))["state"] == "pending"
