"""A collector started with an analyst, against a real chat-completions server: an incident
ingested through the real routes gets the model's analysis, marked as the model's; a playbook
it suggests is shown and nothing runs; a model that fails changes nothing while the collector
keeps working; the key shows nowhere; without an analyst nothing is sent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from _chat_model import HANG, chat_model

from stepwatch.act import AnalystConfig

from .conftest import LiveFactory

T0 = 1_780_000_000.0
WAIT_S = 30.0
KEY = "sk-never-shown-1234"
PLAYBOOKS = """\
playbooks:
  - name: cordon
    kind: command
    argv: [echo, "{node}"]
    destructive: false
    dry_run: false
    description: take the node out of the pool
"""


def _poll(fetch: Callable[[], Any]) -> Any:
    """``fetch``'s answer once it is truthy (an assertion error after ``WAIT_S``)."""
    pause = threading.Event()
    for _ in range(int(WAIT_S / 0.05)):
        if got := fetch():
            return got
        pause.wait(0.05)
    raise AssertionError("nothing came")


def _incident(api: httpx.Client) -> None:
    """An OOM log line on node0 of r1 and its loss going NaN, in one batch: one incident,
    still firing."""
    said = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    oom = {"ts": T0 + 1, "kind": "log", "text": said, "labels": {"run": "r1", "node": "node0"}}
    samples = [
        {"name": "loss", "labels": {"run": "r1"}, "step": i, "ts": T0 + i, "value": v}
        for i, v in enumerate([1.0, 1.0, 1.0, "NaN"])
    ]
    doc = {"source": "trainer-r1", "seq": 1, "samples": samples, "events": [oom]}
    assert api.post("/api/v1/ingest", json=doc).status_code == 200


def _collector(live_factory: LiveFactory, tmp_path: Path, url: str | None, **more: Any) -> Any:
    playbooks = tmp_path / "playbooks.yaml"
    playbooks.write_text(PLAYBOOKS)
    analyst = None if url is None else AnalystConfig(url, "test-model", KEY, interval_s=0.1, **more)
    return live_factory(upkeep_interval_s=3600, playbooks=playbooks, analyst=analyst)


def _analysis(api: httpx.Client, incident: str) -> dict[str, Any]:
    got = api.get(f"/api/v1/alerts/incidents/{incident}/analysis")
    assert got.status_code == 200, got.text
    assert KEY not in got.text
    return dict(got.json())


def _incidents(api: httpx.Client) -> list[dict[str, Any]]:
    got = api.get("/api/v1/alerts/incidents")
    assert got.status_code == 200 and KEY not in got.text
    return list(got.json())


def test_an_incident_gets_the_model_s_analysis_and_its_suggestion_runs_nothing(
    live_factory: LiveFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="stepwatch")
    answer = "The OOM on node0 made the loss NaN.\nPLAYBOOK: cordon, rm-everything"
    with chat_model(answer) as model:
        collector = _collector(live_factory, tmp_path, model.url)
        with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
            _incident(api)
            (incident,) = _poll(lambda: [i for i in _incidents(api) if "analysis" in i])
            assert [a["kind"] for a in incident["alerts"]] == ["log_oom", "nonfinite"]
            analysis = incident["analysis"]
            assert analysis == {
                "by": "model", "model": "test-model", "text": answer, "at": analysis["at"],
                "suggested_playbooks": ["cordon"],
            }  # fmt: skip
            state = _analysis(api, incident["id"])
            assert (state["state"], state["analysis"], state["tries"]) == ("done", analysis, 1)
            assert api.get("/api/v1/actions").json() == []  # suggested, never requested
            assert api.get("/api/v1/audit").json() == []
            asked = api.post(f"/api/v1/alerts/incidents/{incident['id']}/analysis")
            assert asked.status_code == 202 and asked.json()["state"] == "asked"
            assert len(model.wait_for(2)) == 2
            _poll(lambda: _analysis(api, incident["id"])["tries"] == 2)
            metrics = api.get("/metrics").text
    assert 'stepwatch_incident_analyses_total{result="ok"} 2.0' in metrics
    first = model.asked[0]
    assert first.path == "/v1/chat/completions"
    assert first.headers["Authorization"] == f"Bearer {KEY}"
    assert first.body["model"] == "test-model"
    assert [m["role"] for m in first.body["messages"]] == ["system", "user"]
    for part in ("log_oom", "nonfinite", "CUDA out of memory", "cordon"):
        assert part in first.prompt, part
    assert "incident" in caplog.text and KEY not in caplog.text


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ((500, b'{"error": "overloaded"}'), "http_error"),
        ((200, b"garbage{"), "bad_answer"),
        ((200, b'{"id": "x", "object": "chat.completion"}'), "bad_answer"),
        (HANG, "timeout"),
    ],
)
def test_a_model_that_fails_changes_nothing_and_the_collector_keeps_working(
    live_factory: LiveFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    answer: tuple[int, bytes],
    reason: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="stepwatch")
    with chat_model(answers=[answer]) as model:
        collector = _collector(live_factory, tmp_path, model.url, timeout_s=0.5)
        with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
            _incident(api)
            (incident,) = _poll(lambda: _incidents(api))
            failed = _poll(lambda: (s := _analysis(api, incident["id"]))["state"] == "failed" and s)
            assert failed["analysis"] is None and failed["tries"] == 1
            assert "127.0.0.1" in failed["error"]
            assert all("analysis" not in i for i in _incidents(api))
            more = {"name": "loss", "labels": {"run": "r2"}, "step": 0, "ts": T0, "value": 1.0}
            doc = {"source": "trainer-r2", "seq": 1, "samples": [more]}
            assert api.post("/api/v1/ingest", json=doc).status_code == 200
            assert api.get("/readyz").status_code == 200
            metrics = api.get("/metrics").text
    assert f'stepwatch_incident_analyses_total{{result="{reason}"}} 1.0' in metrics
    assert len(model.asked) == 1  # tried again minutes later, not at once
    assert "no analysis of incident" in caplog.text and KEY not in caplog.text


def test_without_an_analyst_nothing_is_sent(live_factory: LiveFactory, tmp_path: Path) -> None:
    with chat_model() as model:
        collector = _collector(live_factory, tmp_path, None)
        with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
            _incident(api)
            (incident,) = _poll(lambda: _incidents(api))
            assert "analysis" not in incident
            assert _analysis(api, incident["id"]) == {
                "incident": incident["id"], "state": "none", "analysis": None, "tries": 0,
                "error": "",
            }  # fmt: skip
            asked = api.post(f"/api/v1/alerts/incidents/{incident['id']}/analysis")
            assert asked.status_code == 409 and "--analyst" in asked.json()["error"]
            # an alert of the incident, but not its first: no incident begins with it
            (second,) = _poll(lambda: [a["id"] for i in _incidents(api) for a in i["alerts"][1:]])
            for method in ("GET", "POST"):
                got = api.request(method, f"/api/v1/alerts/incidents/{second}/analysis")
                assert got.status_code == 404 and "unknown incident" in got.json()["error"]
            assert "stepwatch_incident_analyses" not in api.get("/metrics").text
        assert "stepwatch-analyst" not in {t.name for t in threading.enumerate()}
    assert model.asked == []


def test_an_unknown_incident_is_404(live_factory: LiveFactory, tmp_path: Path) -> None:
    collector = _collector(live_factory, tmp_path, "http://127.0.0.1:9/v1")
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
        for method in ("GET", "POST"):
            got = api.request(method, "/api/v1/alerts/incidents/nope/analysis")
            assert got.status_code == 404 and "unknown incident" in got.json()["error"]
