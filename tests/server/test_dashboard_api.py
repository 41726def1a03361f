"""The dashboard's API over a real collector: run summaries, log search, many-series downsampling,
and the live stream of commits (which must not hold up a shutdown)."""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
from typing import Any

import httpx
import numpy as np
import pytest

from stepwatch.model import NO_STEP, Event, SampleBatch, SeriesKey
from stepwatch.server._app import UI_DIR
from stepwatch.server._stream import StreamHub
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

T0 = 1_780_000_000.0


def send(url: str, batch: SampleBatch) -> None:
    body = encode_batch(batch)
    ack = httpx.post(
        url + "/api/v1/ingest", content=body, headers={"Content-Type": BINARY_CONTENT_TYPE}
    )
    assert ack.json()["applied"] is True, ack.text


def metric_batch(
    source: str,
    run: str,
    columns: dict[tuple[str, tuple[tuple[str, Any], ...]], np.ndarray],
    *,
    t0: float = T0,
    steps: bool = True,
    events: tuple[Event, ...] = (),
    seq: int = 1,
) -> SampleBatch:
    """One sample per second per series, from ``t0``; steps 0.. when ``steps``."""
    keys = [SeriesKey.of(name, {"run": run, **dict(labels)}) for name, labels in columns]
    n = len(next(iter(columns.values())))
    series = np.repeat(np.arange(len(keys), dtype=np.uint32), n)
    ts = np.tile(t0 + np.arange(n, dtype=np.float64), len(keys))
    step = (
        np.tile(np.arange(n, dtype=np.int64), len(keys))
        if steps
        else np.full(n * len(keys), NO_STEP, np.int64)
    )
    value = np.concatenate([np.asarray(v, np.float64) for v in columns.values()])
    return SampleBatch(source, seq, keys, series, ts, step, value, list(events))


def get(url: str, path: str, **params: Any) -> Any:
    response = httpx.get(url + path, params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


# ---- run summaries ---------------------------------------------------------------------------


def test_summary_has_progress_pace_eta_latest_values_and_open_alerts(
    server: Any, eventually: Any
) -> None:
    url = server.url
    httpx.post(url + "/api/v1/runs", json={"id": "r1", "name": "7b", "planned_total_steps": 1000})
    httpx.post(url + "/api/v1/runs", json={"id": "r2", "name": "idle"})
    loss = 10.0 - np.arange(100) * 0.05
    grad_norm = np.where(np.arange(100) == 99, np.nan, 1.0)  # the nonfinite_grad_norm alert
    send(
        url,
        metric_batch(
            "rank0",
            "r1",
            {
                ("train.loss", (("rank", 0),)): loss,
                ("train.tokens_per_s", (("rank", 0),)): 1000.0 + np.arange(100),
                ("train.grad_norm", (("rank", 0),)): grad_norm,
            },
        ),
    )
    send(
        url,
        metric_batch(
            "rank0",
            "r1",
            {("train.loss", (("rank", 0),)): [1.0]},
            t0=T0 + 200,
            steps=False,
            seq=2,
        ),
    )

    assert eventually(lambda: any(r["open_alerts"] for r in get(url, "/api/v1/runs/summary")))
    rows = {r["id"]: r for r in get(url, "/api/v1/runs/summary")}
    r1 = rows["r1"]
    assert r1["name"] == "7b" and r1["planned_total_steps"] == 1000
    assert r1["step"] == 99
    assert r1["progress"] == pytest.approx(0.1)
    assert r1["steps_per_s"] == pytest.approx(1.0)  # steps 0..99 over 99 s
    assert r1["eta_s"] == pytest.approx(900.0)  # steps 100..999 at one a second
    assert r1["loss"] == 1.0  # the newest loss sample, even without a step
    assert r1["tokens_per_s"] == 1099.0
    assert r1["last_ts"] == T0 + 200
    assert r1["open_alerts"] == 1
    r2 = rows["r2"]
    assert (r2["step"], r2["progress"], r2["eta_s"], r2["last_ts"]) == (None, None, None, None)
    assert r2["open_alerts"] == 0

    only = get(url, "/api/v1/runs/summary", run="r2")
    assert [r["id"] for r in only] == ["r2"]
    assert get(url, "/api/v1/runs/r1")["id"] == "r1"  # the run route still answers


def test_a_finished_run_has_no_eta(server: Any) -> None:
    url = server.url
    httpx.post(url + "/api/v1/runs", json={"id": "r1", "planned_total_steps": 1000})
    send(url, metric_batch("rank0", "r1", {("train.loss", ()): np.ones(10)}))
    httpx.post(url + "/api/v1/runs/r1/finish", json={"status": "failed"})
    (row,) = get(url, "/api/v1/runs/summary")
    assert row["status"] == "failed" and row["eta_s"] is None and row["step"] == 9


def test_the_summary_sums_the_newest_dropped_count_of_each_producer(server: Any) -> None:
    url = server.url
    httpx.post(url + "/api/v1/runs", json={"id": "r1"})
    httpx.post(url + "/api/v1/runs", json={"id": "r2"})
    counts = {0: [100.0, 250.0], 1: [40.0]}  # cumulative counts, as each producer reports them
    for rank, values in counts.items():
        dropped = {("stepwatch.dropped_samples", (("rank", rank),)): values}
        send(url, metric_batch(f"rank{rank}", "r1", dropped, steps=False))
    send(url, metric_batch("r2-rank0", "r2", {("train.loss", ()): np.ones(3)}))
    rows = {r["id"]: r["dropped_samples"] for r in get(url, "/api/v1/runs/summary")}
    assert rows == {"r1": 290, "r2": 0}


# ---- logs ------------------------------------------------------------------------------------


def log(ts: float, text: str, node: str, rank: int | None = None, **data: Any) -> Event:
    labels = {"run": "r1", "node": node} | ({} if rank is None else {"rank": str(rank)})
    return Event(ts, "log", text, labels, data)


LOGS = (
    log(T0 + 1, "step 1 loss 2.5", "node0", 0, level="info"),
    log(T0 + 2, "NCCL WARN timeout 100% of the time", "node1", 3, level="warning"),
    log(
        T0 + 3,
        "Traceback (most recent call last):\n  ...\nRuntimeError: CUDA error",
        "node1",
        3,
        level="error",
        traceback=True,
        lines=3,
    ),
    log(T0 + 4, "step 2 loss 2.4", "node0", 0, level="info"),
    Event(T0 + 5, "checkpoint", "saved step 2", {"run": "r1"}),
    Event(T0 + 6, "log", "other run's line", {"run": "r2", "node": "node0"}),
)


@pytest.fixture(scope="module")
def logs_url(module_collector_factory: Any) -> str:
    collector = module_collector_factory()
    send(collector.url, metric_batch("agent", "r1", {("host.cpu_pct", ()): [1.0]}, events=LOGS))
    return str(collector.url)


def texts(url: str, **params: Any) -> list[str]:
    return [e["text"].split("\n")[0] for e in get(url, "/api/v1/logs", **params)]


def test_logs_filter_by_run_text_node_rank_and_level(logs_url: str) -> None:
    assert texts(logs_url, run="r1") == [
        "step 1 loss 2.5",
        "NCCL WARN timeout 100% of the time",
        "Traceback (most recent call last):",
        "step 2 loss 2.4",
    ]
    assert texts(logs_url, run="r1", q="LOSS") == ["step 1 loss 2.5", "step 2 loss 2.4"]
    assert texts(logs_url, run="r1", q="100%") == ["NCCL WARN timeout 100% of the time"]
    assert texts(logs_url, run="r1", q="0%") == ["NCCL WARN timeout 100% of the time"]
    assert texts(logs_url, run="r1", q="cuda error") == ["Traceback (most recent call last):"]
    assert texts(logs_url, run="r1", node="node1", rank="3", level="ERROR") == [
        "Traceback (most recent call last):"
    ]
    assert texts(logs_url, run="r1", node="node0") == ["step 1 loss 2.5", "step 2 loss 2.4"]
    assert texts(logs_url) == [*texts(logs_url, run="r1"), "other run's line"]


def test_logs_keep_the_newest_within_the_range_oldest_first(logs_url: str) -> None:
    assert texts(logs_url, run="r1", limit=2) == [
        "Traceback (most recent call last):",
        "step 2 loss 2.4",
    ]
    assert texts(logs_url, run="r1", start=T0 + 2, end=T0 + 3) == [
        "NCCL WARN timeout 100% of the time",
        "Traceback (most recent call last):",
    ]
    (tb,) = get(logs_url, "/api/v1/logs", run="r1", level="error")
    assert tb["data"] == {"level": "error", "traceback": True, "lines": 3}
    assert tb["labels"] == {"run": "r1", "node": "node1", "rank": "3"}


@pytest.mark.parametrize("params", [{"level": "loud"}, {"start": T0 + 5, "end": T0}, {"limit": 0}])
def test_bad_log_queries_are_400(logs_url: str, params: dict[str, Any]) -> None:
    response = httpx.get(logs_url + "/api/v1/logs", params=params)
    assert response.status_code == 400
    assert response.json()["error"]


# ---- many series at once ---------------------------------------------------------------------


def test_multi_matches_downsample_of_each_series_and_adds_steps(server: Any) -> None:
    url = server.url
    rng = np.random.default_rng(7)
    util = {
        ("gpu.util_pct", (("node", "node0"), ("gpu", g))): rng.uniform(0, 100, 600)
        for g in range(3)
    }
    util[("gpu.util_pct", (("node", "node0"), ("gpu", 0)))][17] = math.nan
    send(url, metric_batch("agent", "r1", util, steps=False))
    send(url, metric_batch("rank0", "r1", {("train.loss", ()): np.linspace(5, 1, 600)}))
    send(
        url,
        metric_batch(
            "other", "r2", {("gpu.util_pct", (("node", "node0"), ("gpu", 0))): np.ones(600)}
        ),
    )
    start, end = T0 + 30, T0 + 590

    got = get(
        url, "/api/v1/query/multi", name="gpu.util_pct", run="r1", start=start, end=end, points=50
    )
    assert (got["start"], got["end"]) == (start, end)
    assert sorted(s["labels"]["gpu"] for s in got["series"]) == ["0", "1", "2"]
    for s in got["series"]:
        single = get(
            url, "/api/v1/query/downsample", series=s["id"], start=start, end=end, points=50
        )
        for col in ("ts", "min", "max", "last", "count"):
            assert s[col] == single[col], col
        assert s["step"] == [None] * len(s["ts"])
    gpu1 = get(
        url,
        "/api/v1/query/multi",
        name="gpu.util_pct",
        run="r1",
        label="gpu:1",
        start=start,
        end=end,
        points=50,
    )
    assert [s["labels"]["gpu"] for s in gpu1["series"]] == ["1"]

    (loss,) = get(
        url, "/api/v1/query/multi", name="loss", run="r1", start=T0, end=T0 + 600, points=60
    )["series"]
    assert loss["step"] == [int(t - T0) + 9 for t in loss["ts"]]  # the last step of each 10 s
    assert loss["count"] == [10] * 60


def test_multi_sends_only_the_fields_asked_for(server: Any) -> None:
    send(server.url, metric_batch("rank0", "r1", {("train.loss", ()): np.arange(20.0)}))
    (s,) = get(
        server.url,
        "/api/v1/query/multi",
        name="loss",
        start=T0,
        end=T0 + 20,
        points=2,
        fields="last",
    )["series"]
    assert set(s) == {"id", "name", "labels", "ts", "last"}
    assert s["last"] == [9.0, 19.0]
    bad = httpx.get(
        server.url + "/api/v1/query/multi",
        params={"start": T0, "end": T0 + 1, "fields": "last,median"},
    )
    assert bad.status_code == 400 and "fields" in bad.json()["error"]


def test_multi_takes_several_names(server: Any) -> None:
    values = {("gpu.temp_c", (("gpu", 0),)): np.full(60, 40.0)}
    values[("gpu.power_w", (("gpu", 0),))] = np.full(60, 300.0)
    values[("gpu.util_pct", (("gpu", 0),))] = np.full(60, 90.0)
    send(server.url, metric_batch("agent", "r1", values, steps=False))
    params = {"name": ["gpu.power_w", "gpu.temp_c"], "run": "r1", "fields": "last"}
    got = get(server.url, "/api/v1/query/multi", start=T0, end=T0 + 60, points=6, **params)
    assert [(s["name"], s["last"]) for s in got["series"]] == [
        ("gpu.power_w", [300.0] * 6),
        ("gpu.temp_c", [40.0] * 6),
    ]


def test_multi_of_nothing_is_empty(server: Any) -> None:
    got = get(server.url, "/api/v1/query/multi", name="gpu.temp_c", start=T0, end=T0 + 1)
    assert got["series"] == []
    bad = httpx.get(server.url + "/api/v1/query/multi", params={"start": T0, "end": T0 - 1})
    assert bad.status_code == 400


# ---- the live stream -------------------------------------------------------------------------


def read_events(lines: Any, want: int) -> list[tuple[str, dict[str, Any]]]:
    """The next ``want`` events of an SSE line iterator, as (event name, JSON data)."""
    out: list[tuple[str, dict[str, Any]]] = []
    name = "message"
    for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            out.append((name, json.loads(line[5:])))
            if len(out) == want:
                return out
    return out


def test_stream_tells_a_runs_subscribers_of_its_commits_only(server: Any) -> None:
    url = server.url
    with httpx.stream("GET", url + "/api/v1/stream", params={"run": "r1"}, timeout=30) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = resp.iter_lines()
        assert next(lines).startswith("retry:")
        assert next(lines) == ": connected"
        send(url, metric_batch("other", "r2", {("train.loss", ()): np.ones(5)}))
        send(
            url,
            metric_batch(
                "rank0",
                "r1",
                {("train.loss", ()): np.ones(5)},
                t0=T0 + 100,
                events=(log(T0 + 50, "hello", "node0"),),
            ),
        )
        got = read_events(lines, 2)
    assert got == [
        ("data", {"run": "r1", "ts": T0 + 104}),
        ("events", {"run": "r1", "kinds": {"log": T0 + 50}}),
    ]


def test_stream_skips_duplicates_and_splits_batches_of_several_runs(server: Any) -> None:
    url = server.url
    with httpx.stream("GET", url + "/api/v1/stream", timeout=30) as resp:
        lines = resp.iter_lines()
        assert next(lines).startswith("retry:")
        send(url, metric_batch("a", "r1", {("train.loss", ()): np.ones(3)}))
        ack = httpx.post(  # the same source and seq again: a duplicate, never applied
            url + "/api/v1/ingest",
            content=encode_batch(metric_batch("a", "r1", {("train.loss", ()): [1.0]}, t0=T0 + 900)),
            headers={"Content-Type": BINARY_CONTENT_TYPE},
        )
        assert ack.json()["applied"] is False
        assert read_events(lines, 1) == [("data", {"run": "r1", "ts": T0 + 2})]
        keys = [SeriesKey.of("train.loss", {"run": r}) for r in ("r1", "r2")]
        keys.append(SeriesKey.of("host.cpu_pct", {}))
        mixed = SampleBatch(
            "b",
            1,
            keys,
            np.array([0, 1, 2, 1], np.uint32),
            np.array([T0 + 10, T0 + 20, T0 + 30, T0 + 25]),
            np.full(4, NO_STEP, np.int64),
            np.ones(4),
            [Event(T0 + 5, "note", "no run")],
        )
        send(url, mixed)
        got = read_events(lines, 4)  # the duplicate (ts T0 + 900) told nobody
    assert got == [
        ("data", {"run": None, "ts": T0 + 30}),
        ("events", {"run": None, "kinds": {"note": T0 + 5}}),
        ("data", {"run": "r1", "ts": T0 + 10}),
        ("data", {"run": "r2", "ts": T0 + 25}),
    ]


def test_a_slow_reader_gets_one_line_per_run_and_close_ends_the_stream() -> None:
    """Commits merge while nobody reads; close() from another thread ends the stream."""

    async def rest(stream: Any) -> list[str]:
        return [chunk async for chunk in stream]

    async def scenario() -> list[str]:
        hub = StreamHub()
        stream = hub.events("r1")
        out = [await anext(stream)]
        for k in range(500):
            hub.publish([metric_batch("a", "r1", {("train.loss", ()): [1.0]}, t0=T0 + k, seq=k)])
        hub.publish([metric_batch("b", "r2", {("train.loss", ()): [1.0]}, t0=T0 + 999)])
        out.append(await anext(stream))
        closer = threading.Thread(target=hub.close)
        closer.start()
        out += await asyncio.wait_for(rest(stream), 10)  # times out unless close() ends it
        closer.join()
        return out

    result: list[list[str]] = []  # a thread of its own: the caller may already run a loop
    runner = threading.Thread(target=lambda: result.append(asyncio.run(scenario())))
    runner.start()
    runner.join()
    assert result == [
        [
            "retry: 2000\n: connected\n\n",
            f"event: data\ndata: {json.dumps({'run': 'r1', 'ts': T0 + 499})}\n\n",
        ]
    ]


def test_the_collector_stops_promptly_with_a_stream_open(server: Any) -> None:
    with httpx.stream("GET", server.url + "/api/v1/stream", timeout=30) as resp:
        lines = resp.iter_lines()
        assert next(lines).startswith("retry:")
        assert server.stop() == 0  # SIGTERM; a stream left open would hold it until killed
        assert [line for line in lines if line.startswith("event:")] == []  # and it ended


# ---- the page's modules ----------------------------------------------------------------------


def test_the_page_preloads_every_module_and_every_import_resolves() -> None:
    """Preloading all modules at once saves a round trip per import level; a module left out of
    the list, or an import of a missing file, would slow or break the page."""
    modules = {p for p in UI_DIR.rglob("*.js") if "vendor" not in p.parts}
    page = (UI_DIR / "index.html").read_text()
    preloaded = set(re.findall(r'<link rel="modulepreload" href="/ui/([^"]+)">', page))
    assert preloaded == {p.relative_to(UI_DIR).as_posix() for p in modules}
    for module in modules:
        for target in re.findall(r'^import .* from "(\.[^"]+)";$', module.read_text(), re.M):
            assert (module.parent / target).resolve().is_file(), f"{module}: {target}"
