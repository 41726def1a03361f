"""Log search and Elasticsearch's _bulk against a real collector: the source document's query
verbatim, context lines, project scoping, a saved search as a rule, NDJSON ingest."""

from __future__ import annotations

import base64
import gzip
import json
import time
import uuid
from typing import Any

import httpx
import pytest
import yaml

from stepwatch.detect import parse_rules

T0 = time.time() - 600
SOURCE_QUERY = {
    "query": {
        "bool": {
            "must": [
                {"match": {"message": "CUDA out of memory"}},
                {"match": {"level": "ERROR"}},
            ]
        }
    }
}


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


@pytest.fixture(scope="module")
def fleet(module_collector_factory: Any) -> Any:
    """A collector with auth, a run in each project, and log lines in both."""
    collector = module_collector_factory(auth=True)
    api = httpx.Client(base_url=collector.url, headers=collector.headers, timeout=30)
    runs = {}
    for project in ("default", "other"):
        run = f"{project}-{uuid.uuid4().hex[:6]}"
        _ok(api.post("/api/v1/runs", json={"id": run, "project": project, "start": T0}))
        runs[project] = run
        events = [
            {"ts": T0 + i, "kind": "log", "text": f"step {i} loss=2.{i}",
             "labels": {"run": run, "node": "n1", "rank": "0"}, "data": {"level": "info"}}
            for i in range(20)
        ]  # fmt: skip
        events.append(
            {"ts": T0 + 9.5, "kind": "log", "text": "RuntimeError: CUDA out of memory.",
             "labels": {"run": run, "node": "n1", "rank": "0"}, "data": {"level": "error"}}
        )  # fmt: skip
        events.append(
            {"ts": T0 + 9.6, "kind": "log", "text": "step 9 on another node",
             "labels": {"run": run, "node": "n2", "rank": "0"}, "data": {"level": "info"}}
        )  # fmt: skip
        doc = {"source": f"logs-{run}", "seq": 1, "events": events}
        _ok(api.post("/api/v1/ingest", json=doc))
    yield collector, api, runs
    api.close()


def _search(
    collector: Any, body: dict[str, Any], role: str = "admin", project: str = "default"
) -> Any:
    headers = collector.headers_of(role, project) if role != "root" else collector.headers
    return httpx.post(f"{collector.url}/api/v1/logs/search", json=body, headers=headers, timeout=30)


def test_the_source_query_finds_the_oom_line_of_the_callers_project_only(fleet: Any) -> None:
    collector, _, runs = fleet
    found = _ok(_search(collector, SOURCE_QUERY, "viewer", "default"))["hits"]
    assert [(h["labels"]["run"], h["text"]) for h in found] == [
        (runs["default"], "RuntimeError: CUDA out of memory.")
    ]
    other = _ok(_search(collector, SOURCE_QUERY, "viewer", "other"))["hits"]
    assert [h["labels"]["run"] for h in other] == [runs["other"]]
    everyone = _ok(_search(collector, SOURCE_QUERY, "root"))["hits"]
    assert {h["labels"]["run"] for h in everyone} == set(runs.values())
    window = {"query": {"bool": {**SOURCE_QUERY["query"]["bool"],
              "filter": [{"range": {"@timestamp": {"gte": "now-5m"}}}]}}}  # fmt: skip
    assert _ok(_search(collector, window, "viewer"))["hits"] == []  # the lines are 10 min old
    window["query"]["bool"]["filter"][0]["range"]["@timestamp"]["gte"] = "now-1h"
    assert len(_ok(_search(collector, window, "viewer"))["hits"]) == 1


def test_a_hit_comes_with_the_lines_of_its_stream_around_it(fleet: Any) -> None:
    collector, _, runs = fleet
    body = {**SOURCE_QUERY, "context": 3, "run": runs["default"]}
    (hit,) = _ok(_search(collector, body))["hits"]
    assert [e["text"] for e in hit["before"]] == ["step 7 loss=2.7", "step 8 loss=2.8",
                                                  "step 9 loss=2.9"]  # fmt: skip
    assert [e["text"] for e in hit["after"]] == ["step 10 loss=2.10", "step 11 loss=2.11",
                                                 "step 12 loss=2.12"]  # fmt: skip


def test_plain_fields_filter_and_order(fleet: Any) -> None:
    collector, _, runs = fleet
    body = {"q": "LOSS=2.1", "run": runs["default"], "start": T0 + 10, "end": T0 + 12,
            "level": "info", "node": "n1", "order": "asc"}  # fmt: skip
    texts = [h["text"] for h in _ok(_search(collector, body))["hits"]]
    assert texts == ["step 10 loss=2.10", "step 11 loss=2.11", "step 12 loss=2.12"]
    body = {"regex": "^step 1[0-9] ", "run": runs["default"], "limit": 2}
    assert [h["text"] for h in _ok(_search(collector, body))["hits"]] == [
        "step 19 loss=2.19", "step 18 loss=2.18"
    ]  # fmt: skip


def test_a_query_it_cannot_take_is_a_400_naming_the_clause(fleet: Any) -> None:
    collector, _, _ = fleet
    response = _search(collector, {"query": {"bool": {"must": [{"fuzzy": {"message": "x"}}]}}})
    assert response.status_code == 400
    assert "query.bool.must[0].fuzzy" in response.json()["error"]


def test_a_saved_search_becomes_a_rule_that_reads_back(fleet: Any) -> None:
    collector, _, _ = fleet
    body = {**SOURCE_QUERY, "node": "n1", "alert": "oom_errors", "severity": "critical"}
    made = _ok(httpx.post(f"{collector.url}/api/v1/logs/search/rule", json=body,
                          headers=collector.headers_of("viewer"), timeout=30))  # fmt: skip
    (rule,) = parse_rules(made["yaml"], "saved.yaml", {}).rules
    assert rule.alert == "oom_errors" and rule.severity == "critical"
    assert rule.signal.log is not None and rule.signal.log.query is not None
    assert yaml.safe_load(made["yaml"])["groups"][0]["rules"][0]["signal"]["by"] == ["run", "node"]


def _bulk(collector: Any, body: bytes, path: str = "/_bulk", **headers: str) -> httpx.Response:
    return httpx.post(f"{collector.url}{path}", content=body, headers=headers, timeout=30)


def test_bulk_takes_ndjson_as_elasticsearch_does(fleet: Any) -> None:
    collector, _, runs = fleet
    run = runs["default"]
    docs = [
        {"index": {"_index": "train"}},
        {"@timestamp": "2026-05-01T10:00:00.5Z", "message": "bulk line one", "run": run,
         "host": {"name": "gpu-7"}, "log": {"level": "ERR"}, "labels": {"rank": 3}},
        {"create": {}},
        {"@timestamp": 1777629600000, "message": "bulk line two", "labels": {"run": run},
         "hostname": "gpu-8"},
        {"delete": {"_id": "1"}},
        {"index": {}},
        {"no message": True, "run": run},
    ]  # fmt: skip
    ndjson = "".join(json.dumps(d) + "\n" for d in docs).encode()
    token = collector.tokens["ingest", "default"]
    answer = _ok(_bulk(collector, gzip.compress(ndjson), "/train/_bulk",
                       Authorization=f"Basic {_basic('shipper', token)}",
                       **{"Content-Encoding": "gzip"}))  # fmt: skip
    assert answer["errors"] is True
    assert [next(iter(i.values()))["status"] for i in answer["items"]] == [201, 201, 400, 400]
    body = {"q": "bulk line", "run": run, "order": "asc"}
    hits = _ok(_search(collector, body))["hits"]
    assert [(h["text"], h["labels"].get("node"), h["data"].get("level")) for h in hits] == [
        ("bulk line two", "gpu-8", None), ("bulk line one", "gpu-7", "error")
    ]  # fmt: skip
    assert hits[1]["labels"]["rank"] == "3" and hits[1]["data"]["index"] == "train"
    assert hits[1]["ts"] == pytest.approx(1777629600.5)


def test_bulk_refuses_wrong_credentials_and_other_projects(fleet: Any) -> None:
    collector, _, runs = fleet
    line = json.dumps({"message": "x", "run": runs["other"]})
    ndjson = f'{{"index": {{}}}}\n{line}\n'.encode()
    token = collector.tokens["ingest", "default"]
    assert _bulk(collector, ndjson, Authorization=f"ApiKey {token}").status_code == 403
    wrong = _bulk(collector, ndjson, Authorization=f"Basic {_basic('u', 'swt_nope')}")
    assert wrong.status_code == 401
    viewer = collector.tokens["viewer", "other"]
    assert _bulk(collector, ndjson, Authorization=f"Bearer {viewer}").status_code == 403
    version = httpx.get(f"{collector.url}/es", headers={"Authorization": f"ApiKey {token}"})
    assert _ok(version)["version"]["number"].startswith("8.")
    assert version.headers["x-elastic-product"] == "Elasticsearch"


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()
