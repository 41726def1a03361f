"""A kept trace analysed by the collector: the same object `stepwatch trace --json` prints for
the file (a real CPU torch.profiler trace, uploaded as training processes upload them), the
spans of its first profiled step for the timeline, bounded, kept in memory once analysed, and
a run of another project answering 404."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from _profiles import cpu_trace

from stepwatch.server import _profile_analysis
from stepwatch.server._profile_analysis import MAX_SPANS, analyse_profile
from stepwatch.trace import analyse_trace

T0 = 1_780_000_000.0


def upload(api: httpx.Client, run: str, trace: bytes, rank: str = "0") -> str:
    made = api.post(
        f"/api/v1/runs/{run}/profiles", params={"steps": 2, "first_step": 1, "rank": rank},
        content=trace, headers={"Content-Type": "application/gzip"},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cpu_trace(tmp_path_factory.mktemp("trace") / "cpu.json")


def test_the_analysis_is_stepwatch_trace_s_with_the_step_s_spans(
    module_collector_factory: Any, traced: Path
) -> None:
    collector = module_collector_factory(auth=True)
    with httpx.Client(base_url=collector.url, headers=collector.headers, timeout=30) as api:
        for project in ("default", "other"):
            body = {"id": f"{project}-run", "project": project, "start": T0}
            assert api.post("/api/v1/runs", json=body).is_success
        profile = upload(api, "default-run", gzip.compress(traced.read_bytes()))
        theirs = upload(api, "other-run", gzip.compress(traced.read_bytes()))

    def get(run: str, profile_id: str, project: str = "default") -> httpx.Response:
        path = f"/api/v1/runs/{run}/profiles/{profile_id}/analysis"
        return httpx.get(collector.url + path, headers=collector.headers_of("viewer", project))

    got = get("default-run", profile)
    assert got.status_code == 200, got.text
    answer = got.json()
    expected = analyse_trace(traced).to_json()
    assert answer["ops"] == expected["ops"]
    assert any(o["name"] == "aten::addmm" for o in answer["ops"])
    same = ("kind", "basis", "steps", "events", "breakdown", "span_s", "advice", "cpu")
    assert {k: answer[k] for k in same} == {k: expected[k] for k in same}
    assert set(answer) == {*expected, "timeline", "profile"}
    assert (answer["profile"]["id"], answer["profile"]["rank"]) == (profile, "0")

    timeline = answer["timeline"]
    steps = sorted(e["name"] for e in json.loads(traced.read_text())["traceEvents"]
                   if str(e.get("name", "")).startswith("ProfilerStep#"))  # fmt: skip
    assert timeline["step"] == steps[0] and not timeline["capped"]
    spans, dur = timeline["spans"], timeline["dur_us"]
    assert dur > 0 and len(spans) == timeline["spans_in_step"] > 10
    assert all(0 <= s["start_us"] and s["start_us"] + s["dur_us"] <= dur + 1e-3 for s in spans)
    (step,) = [s for s in spans if s["name"] == timeline["step"]]
    assert (step["depth"], step["start_us"], step["dur_us"]) == (0, 0, dur)
    addmm = [s for s in spans if s["name"] == "aten::addmm"]
    assert addmm and all(s["depth"] >= 1 and s["cat"] == "cpu_op" for s in addmm)
    assert {s["kind"] for s in addmm} == {"cpu"} and step["kind"] == "step"
    assert {s["row"] for s in spans} <= set(range(len(timeline["rows"])))
    assert all(r["kind"] == "cpu" for r in timeline["rows"])

    assert get("other-run", theirs).status_code == 404  # another project's run: as unknown
    assert get("default-run", theirs).status_code == 404  # a profile of another run
    assert get("default-run", "nosuchprofile").status_code == 404
    assert get("other-run", theirs, "other").status_code == 200


def test_opening_a_trace_again_is_served_from_memory(
    live_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last few analyses are kept (LRU): the same trace is analysed once, until enough
    others pushed it out."""
    made: list[int] = []

    def counted(trace: bytes, path: str = "") -> dict[str, Any]:
        made.append(len(trace))
        return analyse_profile(trace, path)

    monkeypatch.setattr(_profile_analysis, "analyse_profile", counted)
    with httpx.Client(base_url=live_factory().url, timeout=30) as api:
        assert api.post("/api/v1/runs", json={"id": "r", "project": "p", "start": T0}).is_success
        ids = [upload(api, "r", _trace([_op("ProfilerStep#1", 0, 10 + i)])) for i in range(6)]
        first = api.get(f"/api/v1/runs/r/profiles/{ids[0]}/analysis").json()
        assert api.get(f"/api/v1/runs/r/profiles/{ids[0]}/analysis").json() == first
        assert len(made) == 1
        for profile in ids[1:]:
            assert api.get(f"/api/v1/runs/r/profiles/{profile}/analysis").is_success
        assert len(made) == 6
        api.get(f"/api/v1/runs/r/profiles/{ids[0]}/analysis")  # pushed out by the others
        assert len(made) == 7


def test_a_trace_that_cannot_be_read_is_refused_by_name(live_factory: Any) -> None:
    with httpx.Client(base_url=live_factory().url, timeout=30) as api:
        assert api.post("/api/v1/runs", json={"id": "r", "project": "p", "start": T0}).is_success
        broken = upload(api, "r", gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": '))
        got = api.get(f"/api/v1/runs/r/profiles/{broken}/analysis")
        odd = {**_op("ProfilerStep#1", 0, 10), "cat": ["user_annotation"], "args": [1]}
        shapeless = upload(api, "r", _trace([odd]))  # no profiler writes such an event
        refused = api.get(f"/api/v1/runs/r/profiles/{shapeless}/analysis")
    assert got.status_code == 400
    assert f"r/{broken}: not a Chrome/Kineto trace" in got.json()["error"]
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"].startswith("the trace cannot be analysed")


def _op(name: str, ts: float, dur: float, cat: str = "user_annotation", tid: int = 1,
        pid: int = 100) -> dict[str, Any]:  # fmt: skip
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def _trace(events: list[dict[str, Any]]) -> bytes:
    return gzip.compress(json.dumps({"schemaVersion": 1, "traceEvents": events}).encode())


def test_the_timeline_keeps_the_longest_spans_of_the_first_step() -> None:
    n = MAX_SPANS + 500
    base = 1_000_000.0
    events = [
        _op("ProfilerStep#8", base + 50_000, 40_000),  # the later step, first in the file
        _op("ProfilerStep#7", base, 50_000),
        _op("aten::outside", base - 100, 50),  # before the step: not on its timeline
        _op("aten::linear", base + 10, 30_000, "cpu_op"),
        _op("aten::addmm", base + 20, 20_000, "cpu_op"),
        _op("aten::crossing", base + 45_000, 10_000, "cpu_op", tid=2),  # cut at the step's end
        {**_op("gemm", base + 100, 900, "kernel", tid=7, pid=0), "args": {"device": 0}},
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    ]
    # many short operators on a second thread, each 1 µs longer than the one before
    events += [_op("aten::small", base + 30_100 + 2 * i, 0.001 * i, "cpu_op", tid=3)
               for i in range(n)]  # fmt: skip
    timeline = analyse_profile(_trace(events))["timeline"]
    assert (timeline["step"], timeline["dur_us"]) == ("ProfilerStep#7", 50_000)
    assert timeline["capped"] and timeline["spans_in_step"] == n + 5
    spans = timeline["spans"]
    assert len(spans) == MAX_SPANS == timeline["max_spans"]
    small = sorted(s["dur_us"] for s in spans if s["name"] == "aten::small")
    assert len(small) == MAX_SPANS - 5 and small[0] == pytest.approx(0.001 * (n - len(small)))
    by_name = {s["name"]: s for s in spans}
    assert "aten::outside" not in by_name and "ProfilerStep#8" not in by_name
    depths = {k: by_name[k]["depth"] for k in ("ProfilerStep#7", "aten::linear", "aten::addmm")}
    assert depths == {"ProfilerStep#7": 0, "aten::linear": 1, "aten::addmm": 2}
    crossing = by_name["aten::crossing"]
    assert (crossing["start_us"], crossing["dur_us"], crossing.get("cut")) == (45_000, 5_000, True)
    rows = timeline["rows"]
    assert [r["kind"] for r in rows] == ["cpu", "cpu", "cpu", "gpu"]
    assert rows[0]["name"] == "100 · main" and rows[-1]["name"] == "GPU 0 · 7"
    assert rows[by_name["gemm"]["row"]]["kind"] == "gpu"


def test_a_trace_without_steps_shows_all_of_it() -> None:
    timeline = analyse_profile(_trace([_op("aten::mm", 10, 5, "cpu_op"),
                                       _op("aten::add", 20, 5, "cpu_op")]))["timeline"]  # fmt: skip
    assert (timeline["step"], timeline["dur_us"]) == (None, 15)
    spans = [(s["name"], s["start_us"]) for s in timeline["spans"]]
    assert spans == [("aten::mm", 0), ("aten::add", 10)]
    empty = analyse_profile(gzip.compress(b'{"traceEvents": []}'))
    assert empty["timeline"]["spans"] == [] and empty["ops"] == []


def test_an_upload_that_is_no_trace_is_refused_and_nothing_is_kept(live_factory: Any) -> None:
    """Not gzip, gzip of something other than a JSON object, or declared over the limit: a
    clear error, and the run's list of profiles stays empty."""
    from stepwatch.store import MAX_PROFILE_BYTES

    url = live_factory().url
    with httpx.Client(base_url=url, timeout=30) as api:
        assert api.post("/api/v1/runs", json={"id": "r", "project": "p", "start": T0}).is_success
        path = "/api/v1/runs/r/profiles?steps=2"
        plain = api.post(path, content=b'{"traceEvents": []}')
        listed = api.post(path, content=gzip.compress(b"[1, 2]"))
        assert (plain.status_code, listed.status_code) == (400, 400)
        assert "not gzip-compressed" in plain.json()["error"]
        assert "not a Chrome/Kineto JSON object" in listed.json()["error"]
        assert api.get("/api/v1/runs/r/profiles").json() == []
    big = _declared(url, path, MAX_PROFILE_BYTES + 1)
    assert big.startswith("HTTP/1.1 413"), big
    assert f"exceeds the {MAX_PROFILE_BYTES}-byte limit" in big


def _declared(url: str, path: str, length: int) -> str:
    """The answer to a request that declares ``length`` bytes of body and sends none of it."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=30) as conn:
        head = (f"POST {path} HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Length: {length}\r\n"
                "Content-Type: application/gzip\r\nConnection: close\r\n\r\n")  # fmt: skip
        conn.sendall(head.encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer.decode(errors="replace")
