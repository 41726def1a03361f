"""Alerts and silences over HTTP: a NaN loss ingested through the real route becomes an alert
in the list and in the event stream; silences mute, expire and outlive a restart."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

T0 = 1_780_000_000.0
WAIT_S = 30.0


class Stream:
    """Reads an SSE stream on a thread until it ends or ``count`` alert events arrived."""

    def __init__(self, url: str, count: int = 1) -> None:
        self.events: list[dict[str, Any]] = []
        self.connected = threading.Event()
        self.ended = threading.Event()
        self._url, self._count = url, count
        self._thread = threading.Thread(target=self._read, name="sse-reader")
        self._thread.start()
        assert self.connected.wait(WAIT_S), "the stream did not open"

    def _read(self) -> None:
        try:
            with httpx.stream("GET", self._url, timeout=WAIT_S) as response:
                self.status = response.status_code
                self.content_type = response.headers["content-type"]
                kind = None
                for line in response.iter_lines():
                    if line == ": connected":
                        self.connected.set()
                    elif line.startswith("event: "):
                        kind = line[len("event: ") :]
                    elif line.startswith("data: ") and kind == "alert":
                        self.events.append(json.loads(line[len("data: ") :]))
                        if len(self.events) >= self._count:
                            return
        finally:
            self.connected.set()
            self.ended.set()

    def join(self) -> None:
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the stream is still open"


@pytest.fixture
def api(live_factory: Any) -> Iterator[httpx.Client]:
    # no size reports of the collector's store: detection would count them among its samples
    collector = live_factory(upkeep_interval_s=3600)
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as client:
        yield client


def _base(api: httpx.Client) -> str:
    return str(api.base_url).rstrip("/")


def _alerts(api: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    response = api.get("/api/v1/alerts", params=params)
    assert response.status_code == 200, response.text
    return list(response.json())


def test_a_nan_loss_is_listed_and_streamed(
    api: httpx.Client, loss_doc: Any, eventually: Any
) -> None:
    stream = Stream(f"{str(api.base_url).rstrip('/')}/api/v1/alerts/stream?run=r1", count=2)
    other_run = api.post("/api/v1/ingest", json=loss_doc(1, "r0", [1.0, "NaN", 1.0], T0))
    assert other_run.status_code == 200  # another run's alerts are not on this stream
    response = api.post("/api/v1/ingest", json=loss_doc(1, "r1", [2.0, 1.9, "NaN", 1.8, 1.7], T0))
    assert response.status_code == 200 and response.json()["applied"]
    stream.join()
    assert stream.content_type.startswith("text/event-stream")
    firing, resolved = stream.events
    assert (firing["state"], resolved["state"]) == ("firing", "resolved")
    assert firing["id"] == resolved["id"]
    assert firing["kind"] == "nonfinite" and firing["labels"] == {"run": "r1"}
    assert (firing["since"], firing["ts"], resolved["ts"]) == (T0 + 2, T0 + 2, T0 + 3)
    assert firing["value"] == "NaN" and firing["severity"] == "critical"
    assert firing["annotations"]["summary"] and firing["playbook"]
    (listed,) = eventually(lambda: _alerts(api, run="r1", state="all"))
    assert listed == {**resolved, "acked": False}
    stats = api.get("/api/v1/alerts/stats").json()
    assert stats["samples"] == 8 and stats["transitions"] == 4
    assert stats["rules"] > 10 and stats["dropped"] == stats["errors"] == 0
    warming = {(w["rule"], w["labels"]["run"], w["seen"], w["needed"]) for w in stats["warming_up"]}
    assert ("loss_spike", "r1", 4, 8) in warming  # the NaN is no baseline


def test_alerts_filter_by_state_kind_and_run(
    api: httpx.Client, loss_doc: Any, eventually: Any
) -> None:
    api.post("/api/v1/ingest", json=loss_doc(1, "r1", [1.0, "NaN", "NaN"], T0))  # stays firing
    api.post("/api/v1/ingest", json=loss_doc(1, "r2", [1.0, "NaN", 1.0], T0))  # fires, resolves
    assert len(
        eventually(lambda: len(_alerts(api, state="all")) == 2 and _alerts(api, state="all"))
    )
    (open_,) = _alerts(api)
    assert open_["labels"]["run"] == "r1" and open_["state"] == "firing"
    assert _alerts(api, state="firing") == [open_]
    (done,) = _alerts(api, state="resolved")
    assert done["labels"]["run"] == "r2"
    assert _alerts(api, state="pending") == []
    assert _alerts(api, state="all", kind="gpu_thermal") == []
    assert [a["labels"]["run"] for a in _alerts(api, state="all", run="r2")] == ["r2"]
    assert len(_alerts(api, state="all", limit=1)) == 1
    bad = api.get("/api/v1/alerts", params={"state": "sleeping"})
    assert bad.status_code == 400 and "state" in bad.json()["error"]


def test_ack_marks_an_alert_and_unknown_ids_are_404(
    api: httpx.Client, loss_doc: Any, eventually: Any
) -> None:
    api.post("/api/v1/ingest", json=loss_doc(1, "r1", [1.0, "NaN"], T0))
    (alert,) = eventually(lambda: _alerts(api))
    response = api.post(f"/api/v1/alerts/{alert['id']}/ack", json={"comment": "mine"})
    assert response.status_code == 200 and response.json()["acked"] is True
    assert _alerts(api)[0]["acked"] is True
    (ack,) = api.get("/api/v1/events", params={"kind": "alert_ack"}).json()
    assert ack["data"] == {"id": alert["id"], "by": "local", "comment": "mine"}  # auth off
    assert api.post("/api/v1/alerts/nope/ack", json={}).status_code == 404


def test_a_silence_mutes_matching_alerts_until_it_expires(api: httpx.Client, loss_doc: Any) -> None:
    body = {"matchers": ["run=r1", "kind=~non.*"], "duration_s": 3600, "comment": "known"}
    assert api.post("/api/v1/silences", json={**body, "created_by": "ops"}).status_code == 400
    created = api.post("/api/v1/silences", json=body)
    assert created.status_code == 201
    silence = created.json()
    assert silence["created_by"] == "local"  # the caller's identity, never a field it sends
    assert silence["matchers"] == ["run=r1", "kind=~non.*"] and silence["active"] is True
    assert silence["ends"] - silence["starts"] == pytest.approx(3600)
    assert api.get("/api/v1/silences").json() == [silence]
    stream = Stream(f"{str(api.base_url).rstrip('/')}/api/v1/alerts/stream", count=2)
    api.post("/api/v1/ingest", json=loss_doc(1, "r1", [1.0, "NaN"], T0))  # silenced
    api.post("/api/v1/ingest", json=loss_doc(1, "r2", [1.0, "NaN"], T0))  # not
    stream.join()
    assert {e["labels"]["run"]: e["silenced"] for e in stream.events} == {"r1": True, "r2": False}
    expired = api.delete(f"/api/v1/silences/{silence['id']}")
    assert expired.status_code == 200 and expired.json()["active"] is False
    assert api.get("/api/v1/silences").json() == []
    (old,) = api.get("/api/v1/silences", params={"all": 1}).json()
    assert old["id"] == silence["id"] and old["ends"] < silence["ends"]
    assert api.delete("/api/v1/silences/nope").status_code == 404


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"matchers": [], "duration_s": 60}, "matchers"),
        ({"matchers": ["node=n1"]}, "exactly one of duration_s or ends_at"),
        ({"matchers": ["node=n1"], "duration_s": 60, "ends_at": 2e9}, "exactly one"),
        ({"matchers": ["node=n1"], "duration_s": -5}, "duration_s"),
        ({"matchers": ["node=n1"], "ends_at": 1000.0}, "not in the future"),
        ({"matchers": ["node"], "duration_s": 60}, "LABEL=VALUE"),
        ({"matchers": ["node=~("], "duration_s": 60}, "regular expression"),
        ({"matchers": ["node=~(?!n1)"], "duration_s": 60}, "'(?!n1)'"),
        ({"matchers": ["node=n1"], "duration_s": 60, "colour": "red"}, "colour"),
    ],
)
def test_a_bad_silence_is_refused_and_changes_nothing(
    api: httpx.Client, body: dict[str, Any], message: str
) -> None:
    response = api.post("/api/v1/silences", json=body)
    assert response.status_code in (400, 422)
    assert message in response.json()["error"]
    assert api.get("/api/v1/silences", params={"all": 1}).json() == []
    assert api.get("/api/v1/events", params={"kind": "silence"}).json() == []


def test_silences_and_alerts_outlive_a_restart(
    live_factory: Any, loss_doc: Any, eventually: Any
) -> None:
    first = live_factory(store="store.duckdb")
    with httpx.Client(base_url=first.url, timeout=WAIT_S) as api:
        kept = api.post("/api/v1/silences", json={"matchers": ["node=n1"], "duration_s": 600})
        ended = api.post("/api/v1/silences", json={"matchers": ["node=n2"], "duration_s": 600})
        api.delete(f"/api/v1/silences/{ended.json()['id']}")
        api.post("/api/v1/ingest", json=loss_doc(1, "r1", [1.0, "NaN"], T0))
        (firing,) = eventually(lambda: _alerts(api))
    first.stop()
    second = live_factory(store="store.duckdb")
    with httpx.Client(base_url=second.url, timeout=WAIT_S) as api:
        assert [s["id"] for s in api.get("/api/v1/silences").json()] == [kept.json()["id"]]
        assert len(api.get("/api/v1/silences", params={"all": 1}).json()) == 2
        (after,) = _alerts(api, state="all")
    assert after["id"] == firing["id"]
    assert (after["state"], after["reason"]) == ("firing", "")  # still: nothing resolved it


def test_the_collector_stops_with_a_stream_open(live_factory: Any) -> None:
    server = live_factory()
    stream = Stream(f"{server.url}/api/v1/alerts/stream")
    server.stop()
    stream.join()
    assert stream.ended.is_set() and stream.events == []


def test_an_alert_event_a_client_writes_is_refused_and_never_listed(
    api: httpx.Client, loss_doc: Any, eventually: Any
) -> None:
    event = {"ts": 1.0, "kind": "alert", "text": "loader stalled", "labels": {"run": "r1"}}
    event["data"] = {"rule": "loader_stall", "severity": "critical"}
    doc = {"source": "client", "seq": 1, "samples": [], "events": [event]}
    refused = api.post("/api/v1/ingest", json=doc)
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "event kind 'alert' is reserved for the collector's own records"
    }
    api.post("/api/v1/ingest", json=loss_doc(1, "r1", [1.0, "NaN"], T0))
    listed = eventually(lambda: [a for a in _alerts(api) if a["kind"] == "nonfinite"])
    assert [a["rule"] for a in _alerts(api)] == [a["rule"] for a in listed]


def test_alerts_group_by_kind_and_run(api: httpx.Client, loss_doc: Any, eventually: Any) -> None:
    for seq, run in enumerate(("r1", "r2", "r3"), 1):
        api.post("/api/v1/ingest", json=loss_doc(seq, run, [1.0, "NaN"], T0))
    eventually(lambda: len(_alerts(api)) == 3)
    groups = api.get("/api/v1/alerts/groups", params={"by": "kind"}).json()
    assert [(g["labels"], g["count"], g["severity"]) for g in groups] == [
        ({"kind": "nonfinite"}, 3, "critical")
    ]
    assert {a["labels"]["run"] for a in groups[0]["alerts"]} == {"r1", "r2", "r3"}
    by_run = api.get("/api/v1/alerts/groups", params={"by": "kind,run"}).json()
    assert sorted(g["labels"]["run"] for g in by_run) == ["r1", "r2", "r3"]
    assert api.get("/api/v1/alerts/groups", params={"by": " , "}).status_code == 400


def test_an_oom_and_the_nan_loss_after_it_are_one_incident_caused_by_the_oom(
    api: httpx.Client, loss_doc: Any
) -> None:
    said = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    oom = {"ts": T0 + 1, "kind": "log", "text": said, "labels": {"run": "r1", "node": "node0"}}
    api.post("/api/v1/ingest", json={"source": "logs-n0", "seq": 1, "events": [oom]})
    api.post("/api/v1/ingest", json=loss_doc(1, "r1", [1.0, 1.0, 1.0, "NaN"], T0))
    api.post("/api/v1/ingest", json=loss_doc(2, "r2", [1.0, "NaN"], T0 + 3600))  # another run
    pause = threading.Event()
    for _ in range(int(WAIT_S / 0.1)):
        everything = api.get("/api/v1/alerts/incidents").json()
        if [len(i["alerts"]) for i in everything] == [1, 2]:
            break
        pause.wait(0.1)
    assert [i["run"] for i in everything] == ["r2", "r1"]  # newest first
    (incident,) = api.get("/api/v1/alerts/incidents", params={"run": "r1"}).json()
    assert incident["run"] == "r1" and incident["open"]
    assert incident["root_cause"]["alert"]["kind"] == "log_oom"
    assert "may explain nonfinite" in incident["root_cause"]["evidence"]
    assert [c["alert"]["kind"] for c in incident["causes"]] == ["log_oom", "nonfinite"]


def test_an_incident_shows_the_playbook_its_root_cause_requested(
    live_factory: Any, tmp_path: Any, eventually: Any
) -> None:
    playbooks = tmp_path / "playbooks.yaml"
    playbooks.write_text(
        "playbooks:\n"
        "  - name: drain_node\n"
        "    kind: command\n"
        '    argv: [echo, drain, "{node}"]\n'
        "    dry_run: false\n"  # destructive: it waits for an approval, nothing runs
        "    triggers: [log_oom]\n"
    )
    collector = live_factory(upkeep_interval_s=3600, playbooks=playbooks)
    said = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    oom = {"ts": T0 + 1, "kind": "log", "text": said, "labels": {"run": "r1", "node": "node0"}}
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
        api.post("/api/v1/ingest", json={"source": "logs-n0", "seq": 1, "events": [oom]})
        (action,) = eventually(lambda: api.get("/api/v1/actions").json())
        (incident,) = api.get("/api/v1/alerts/incidents").json()
    assert incident["root_cause"]["alert"]["kind"] == "log_oom"
    assert action["alert_id"] == incident["root_cause"]["alert"]["id"]
    assert incident["playbooks"] == [
        {"name": "drain_node", "description": "", "action_id": action["id"], "status": "pending"}
    ]
