"""Every route of the OpenAPI schema x every role x own and other project, against one table.

A route missing from ``ROUTES`` fails the test, so a new route cannot be served before
someone writes down who may call it. The tokens are those of project ``default``; "own" fills
the path and body with the seeded ids of ``default``, "other" with those of ``other``.
Expected: no token 401, a role without the permission 403, another project's run (alert,
action, silence, series...) 404 as for an unknown one, and 2xx on the caller's own.
"""

from __future__ import annotations

import gzip
import itertools
import json
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from stepwatch.auth import GRANTS, Permission, Role

OWN, OTHER = "default", "other"
ROLES = ("ingest", "viewer", "operator", "admin", None)  # None: no token
WAIT_S = 30.0
#: The smallest trace a profile upload takes.
TRACE = gzip.compress(b'{"traceEvents": []}')
T0 = 1_780_000_000.0


@dataclass(frozen=True)
class Rule:
    """Who may call a route and what it answers: ``need`` is ``public``, ``signed-in`` or
    permissions joined by ``|``; ``own`` the status on the caller's own project; ``other`` on
    the other project's (None: the route names no project, so it answers as ``own``)."""

    need: str
    own: int = 200
    other: int | None = 404
    anonymous: int = 401


ROUTES: dict[str, Rule] = {
    "GET /healthz": Rule("public", other=None, anonymous=200),
    "GET /readyz": Rule("public", other=None, anonymous=200),
    "GET /metrics": Rule("read", other=None),
    "GET /api/v1/session": Rule("signed-in", other=None),
    "POST /api/v1/session": Rule("public", other=None),  # no token: a wrong one, 401
    "DELETE /api/v1/session": Rule("public", other=None, anonymous=200),
    "GET /api/v1/tokens": Rule("admin", other=None),
    "POST /api/v1/tokens": Rule("admin", 201, 403),  # a token of the other project
    "DELETE /api/v1/tokens/{token_id}": Rule("admin"),
    "POST /api/v1/ingest": Rule("write", other=403),  # data of the other project's run
    "GET /api/v1/runs/summary": Rule("read", other=None),
    "GET /api/v1/logs": Rule("read", other=None),
    "GET /api/v1/query/multi": Rule("read", other=None),
    "GET /api/v1/stream": Rule("read", other=None),
    "POST /api/v1/runs": Rule("write", other=409),  # the other project's run id
    "GET /api/v1/runs": Rule("read", other=None),
    "GET /api/v1/runs/{run_id}": Rule("read"),
    "POST /api/v1/runs/{run_id}/finish": Rule("write|operate"),
    "GET /api/v1/runs/{run_id}/forecast": Rule("read"),
    "GET /api/v1/runs/{run_id}/advice": Rule("read"),
    "POST /api/v1/runs/{run_id}/profiles": Rule("write", 201),
    "GET /api/v1/runs/{run_id}/profiles": Rule("read"),
    "GET /api/v1/runs/{run_id}/profiles/{profile_id}": Rule("read"),
    "GET /api/v1/runs/{run_id}/profiles/{profile_id}/analysis": Rule("read"),
    "POST /api/v1/runs/{run_id}/commands": Rule("operate", 201),
    "GET /api/v1/runs/{run_id}/commands": Rule("write|read"),
    "POST /api/v1/runs/{run_id}/commands/{command_id}/ack": Rule("write"),
    "GET /api/v1/alerts": Rule("read", other=None),
    "GET /api/v1/alerts/stream": Rule("read", other=None),
    "GET /api/v1/alerts/groups": Rule("read", other=None),
    "GET /api/v1/alerts/stats": Rule("read", other=None),
    "GET /api/v1/alerts/incidents": Rule("read", other=None),
    "GET /api/v1/alerts/incidents/{incident_id}/analysis": Rule("read"),
    "POST /api/v1/alerts/incidents/{incident_id}/analysis": Rule("operate", 202),
    "POST /api/v1/alerts/{alert_id}/ack": Rule("operate"),
    "POST /api/v1/silences": Rule("operate", 201, 403),  # project=other
    "GET /api/v1/silences": Rule("read", other=None),
    "DELETE /api/v1/silences/{silence_id}": Rule("operate"),
    "GET /api/v1/playbooks": Rule("read", other=None),
    "GET /api/v1/actions": Rule("read", other=None),
    "POST /api/v1/actions": Rule("operate"),  # on the other project's run: 404
    "GET /api/v1/actions/{action_id}": Rule("read"),
    "POST /api/v1/actions/{action_id}/approve": Rule("admin"),
    "POST /api/v1/actions/{action_id}/reject": Rule("operate"),
    "GET /api/v1/audit": Rule("read", other=None),
    "GET /api/v1/audit/head": Rule("read", 403, other=None),  # for tokens of every project
    "GET /api/v1/fleet": Rule("read", other=None),
    "GET /api/v1/series": Rule("read", other=None),
    "GET /api/v1/query/raw": Rule("read"),  # the other project's series id: 404
    "GET /api/v1/query/downsample": Rule("read"),
    "GET /api/v1/query/percentiles": Rule("read", other=None),
    "GET /api/v1/query/latest": Rule("read", other=None),
    "GET /api/v1/events": Rule("read", other=None),
    "POST /api/v1/logs/search": Rule("read", other=None),
    "POST /api/v1/logs/search/rule": Rule("read", other=None),
    "GET /es": Rule("write", other=None),
    "POST /_bulk": Rule("write", other=403),  # a line of the other project's run
    "POST /{index}/_bulk": Rule("write", other=403),
}


def expected(rule: Rule, role: str | None, project: str) -> int:
    """The status the table says ``role`` (of project ``default``) gets on ``project``."""
    if role is None:
        return rule.anonymous
    if rule.need not in ("public", "signed-in"):
        granted = GRANTS[Role(role)]
        if not any(Permission(p) in granted for p in rule.need.split("|")):
            return 403
    if project == OTHER and rule.other is not None:
        return rule.other
    return rule.own


PLAYBOOKS = """\
playbooks:
  - name: cordon
    kind: command
    argv: [{python}, -c, "pass", "{{node}}"]
    destructive: true
    dry_run: false
"""


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


class Seeded:
    """The collector's data of both projects, and fresh targets for calls that use one up."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector
        self.api = httpx.Client(base_url=collector.url, headers=collector.headers, timeout=WAIT_S)
        self.calls = httpx.Client(base_url=collector.url, timeout=WAIT_S)  # no token of its own
        self.runs = {p: self.new_run(p) for p in (OWN, OTHER)}
        for run in self.runs.values():
            self.ingest(run, ["NaN"])
        self.alerts = {p: self._alert(r) for p, r in self.runs.items()}
        self.series = {p: self._series(r) for p, r in self.runs.items()}
        self.commands = {
            p: _ok(self.api.post(f"/api/v1/runs/{r}/commands", json={"action": "checkpoint"}), 201)
            for p, r in self.runs.items()
        }
        self.actions = {p: self.new_action(p) for p in (OWN, OTHER)}
        self.silences = {p: self.new_silence(p) for p in (OWN, OTHER)}
        self.profiles = {p: self.new_profile(r) for p, r in self.runs.items()}

    def new_run(self, project: str) -> str:
        run = f"{project}-{uuid.uuid4().hex[:8]}"
        _ok(self.api.post("/api/v1/runs", json={"id": run, "project": project, "start": T0}))
        return run

    def ingest(self, run: str, values: list[float | str]) -> None:
        samples = [
            {"name": "loss", "labels": {"run": run}, "step": i, "ts": T0 + i, "value": v}
            for i, v in enumerate([1.0, *values])
        ]
        log = {"ts": T0, "kind": "log", "text": f"hello from {run}", "labels": {"run": run}}
        doc = {"source": f"seed-{run}", "seq": 1, "samples": samples, "events": [log]}
        _ok(self.api.post("/api/v1/ingest", json=doc))

    def _alert(self, run: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while not (found := _ok(self.api.get("/api/v1/alerts", params={"run": run}))):
            assert time.monotonic() < deadline, "no alert was raised"
            time.sleep(0.05)
        return str(found[0]["id"])

    def _series(self, run: str) -> int:
        (found,) = _ok(self.api.get("/api/v1/series", params={"run": run}))
        return int(found["id"])

    def new_profile(self, run: str) -> str:
        made = self.api.post(
            f"/api/v1/runs/{run}/profiles", params={"steps": 1}, content=TRACE,
            headers={"Content-Type": "application/gzip"},
        )  # fmt: skip
        return str(_ok(made, 201)["id"])

    def new_action(self, project: str) -> str:
        labels = {"run": self.runs[project], "node": "n1"}
        made = _ok(self.api.post("/api/v1/actions", json={"playbook": "cordon", "labels": labels}))
        assert made["state"] == "pending"
        return str(made["id"])

    def new_silence(self, project: str) -> str:
        body = {"matchers": ["kind=nothing", f"project={project}"], "duration_s": 600}
        return str(_ok(self.api.post("/api/v1/silences", json=body), 201)["id"])

    def new_token(self, project: str) -> str:
        body = {"role": "viewer", "projects": [project]}
        return str(_ok(self.api.post("/api/v1/tokens", json=body), 201)["id"])


_SOURCES = itertools.count(1)


def _call(seed: Seeded, route: str, role: str | None, project: str) -> httpx.Request:
    """The request of ``route`` by ``role`` on ``project``'s targets (minimal valid bodies)."""
    method, path = route.split(" ")
    run = seed.runs[project]
    fill = {
        "run_id": seed.new_run(project) if route.endswith("/finish") else run,
        "command_id": seed.commands[project]["id"],
        "alert_id": seed.alerts[project],
        "incident_id": seed.alerts[project],  # the first alert of its run's one incident
        "silence_id": seed.new_silence(project) if "{silence_id}" in path else "",
        "action_id": seed.new_action(project) if "{action_id}/" in path else seed.actions[project],
        "token_id": seed.new_token(project) if "{token_id}" in path else "",
        "profile_id": seed.profiles[project],
        "index": "logs",
    }
    params: dict[str, Any] = {}
    if path in ("/api/v1/query/raw", "/api/v1/query/downsample"):
        params = {"series": seed.series[project]}
    elif path == "/api/v1/query/percentiles":
        params = {"name": "loss"}
    elif path == "/api/v1/query/multi":
        params = {"start": T0, "end": T0 + 10}
    body = _body(seed, route, role, project)
    headers = {}
    if role is not None and route != "POST /api/v1/session":  # signing in sends it in the body
        headers["Authorization"] = f"Bearer {seed.collector.tokens[role, OWN]}"
    if route.endswith("/_bulk"):
        doc = {"@timestamp": "2026-05-01T00:00:00Z", "message": "hello", "run": run}
        ndjson = '{"index": {}}\n' + json.dumps(doc) + "\n"
        return seed.calls.build_request(
            method, path.format(**fill), content=ndjson, headers=headers
        )
    if route == "POST /api/v1/runs/{run_id}/profiles":
        params, headers["Content-Type"] = {"steps": 1}, "application/gzip"
        return seed.calls.build_request(
            method, path.format(**fill), params=params, content=TRACE, headers=headers
        )
    return seed.calls.build_request(
        method, path.format(**fill), params=params, json=body, headers=headers
    )


def _body(seed: Seeded, route: str, role: str | None, project: str) -> Any:
    run = seed.runs[project]
    if route == "POST /api/v1/session":
        return {"token": seed.collector.tokens[role, OWN] if role else "swt_wrong"}
    if route == "POST /api/v1/tokens":
        return {"role": "viewer", "projects": [project]}
    if route == "POST /api/v1/ingest":
        sample = {"name": "loss", "labels": {"run": run}, "ts": T0 + 50, "value": 1.0}
        return {"source": f"matrix-{next(_SOURCES)}", "seq": 1, "samples": [sample]}
    if route == "POST /api/v1/runs":
        fresh = {"id": f"matrix-{uuid.uuid4().hex[:8]}", "project": OWN}
        return fresh if project == OWN else {"id": run}
    if route == "POST /api/v1/runs/{run_id}/finish":
        return {"status": "finished"}
    if route == "POST /api/v1/logs/search":
        return {"query": {"match": {"message": "hello"}}, "run": run}
    if route == "POST /api/v1/logs/search/rule":
        return {"q": "hello", "alert": "hello_seen"}
    if route == "POST /api/v1/runs/{run_id}/commands":
        return {"action": "checkpoint"}
    if route.endswith("/ack"):
        return {"result": "ok"} if "commands" in route else {"comment": "seen"}
    if route == "POST /api/v1/silences":
        return {"matchers": ["kind=nothing", f"project={project}"], "duration_s": 60}
    if route == "POST /api/v1/actions":
        return {"playbook": "cordon", "labels": {"run": run, "node": "n1"}, "dry_run": True}
    if route.startswith("POST /api/v1/actions/"):
        return {"comment": "checked"}
    return None


def _status(seed: Seeded, request: httpx.Request) -> int:
    """The status of one call; a stream is closed once its head arrived, and a session cookie
    is forgotten (each call proves who it is by itself)."""
    response = seed.calls.send(request, stream=True)
    try:
        return response.status_code
    finally:
        response.close()
        seed.calls.cookies.clear()


@pytest.fixture(scope="module")
def seed(module_collector_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    playbooks = tmp_path_factory.mktemp("matrix") / "playbooks.yaml"
    playbooks.write_text(PLAYBOOKS.format(python=sys.executable))
    analyst = ("--analyst", "http://127.0.0.1:9/v1", "--analyst-model", "m")  # answers nothing
    collector = module_collector_factory(
        auth=True, extra_args=("--playbooks", str(playbooks), *analyst)
    )
    seeded = Seeded(collector)
    yield seeded
    seeded.api.close()
    seeded.calls.close()


def test_the_table_names_every_route_of_the_schema(seed: Seeded) -> None:
    schema = _ok(seed.api.get("/openapi.json"))
    served = {f"{m.upper()} {path}" for path, item in schema["paths"].items() for m in item}
    assert served - set(ROUTES) == set(), "routes nobody said who may call"
    assert set(ROUTES) - served == set(), "the table names routes that are gone"


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_role_gets_what_the_table_says(seed: Seeded, route: str) -> None:
    wrong = []
    for role, project in itertools.product(ROLES, (OWN, OTHER)):
        want = expected(ROUTES[route], role, project)
        got = _status(seed, _call(seed, route, role, project))
        if got != want:
            wrong.append(f"{role or 'no token'} on {project}: {got}, expected {want}")
    assert not wrong, f"{route}: " + "; ".join(wrong)
