"""Query API over data sent through ingest: series filters, raw, downsample, percentiles, latest."""

from __future__ import annotations

import math
from typing import Any

import httpx
import numpy as np
import pytest

from stepwatch.model import NO_STEP, Event, SampleBatch, SeriesKey
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

T0 = 1_780_000_000.0  # a multiple of 100 s, so 100-s buckets start on a sample
NODES = {0: "node0", 1: "node0", 2: "node1", 3: "node1"}


def send(client: httpx.Client, batch: SampleBatch) -> None:
    body = encode_batch(batch)
    response = client.post(
        "/api/v1/ingest", content=body, headers={"Content-Type": BINARY_CONTENT_TYPE}
    )
    assert response.json()["applied"] is True


def loss_batch() -> SampleBatch:
    """train.loss = step, for 1,000 steps a second apart; step 500 is NaN."""
    value = np.arange(1000, dtype=np.float64)
    value[500] = math.nan
    key = SeriesKey.of("train.loss", {"run": "r1"})
    ts = T0 + np.arange(1000, dtype=np.float64)
    series = np.zeros(1000, np.uint32)
    events = [
        Event(T0 + 5, "checkpoint", "saved", {"run": "r1"}),
        Event(T0 + 6, "log", "hi", {"run": "r1"}),
    ]
    return SampleBatch("loss", 1, [key], series, ts, np.arange(1000, dtype=np.int64), value, events)


def step_time_batch() -> SampleBatch:
    """train.step_time_s of 4 ranks on 2 nodes: rank r reads 100*r + 1 .. 100*r + 100."""
    keys = [
        SeriesKey.of("train.step_time_s", {"run": "r1", "rank": r, "node": NODES[r]}) for r in NODES
    ]
    series = np.repeat(np.arange(4, dtype=np.uint32), 100)
    value = (100.0 * series + np.tile(np.arange(1, 101), 4)).astype(np.float64)
    ts = T0 + np.tile(np.arange(100, dtype=np.float64), 4)
    step = np.full(400, NO_STEP, np.int64)
    return SampleBatch("steps", 1, keys, series, ts, step, value)


@pytest.fixture
def api(client: httpx.Client) -> httpx.Client:
    send(client, loss_batch())
    send(client, step_time_batch())
    return client


def get(api: httpx.Client, path: str, **params: Any) -> Any:
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def series_id(api: httpx.Client, name: str, **labels: str) -> int:
    label = [f"{k}:{v}" for k, v in labels.items()]
    (found,) = get(api, "/api/v1/series", name=name, label=label)
    return int(found["id"])


def test_series_filters_by_name_run_and_labels(api: httpx.Client) -> None:
    names = lambda **p: sorted(  # noqa: E731
        (s["name"], s["labels"].get("rank")) for s in get(api, "/api/v1/series", **p)
    )
    assert len(names()) == 5
    assert names(name="loss") == [("train.loss", None)]
    assert names(name="train.step_time_s", label="node:node1") == [
        ("train.step_time_s", "2"),
        ("train.step_time_s", "3"),
    ]
    assert names(run="r1", label=["node:node0", "rank:1"]) == [("train.step_time_s", "1")]
    assert names(run="other") == []


def test_raw_honours_range_and_limit(api: httpx.Client) -> None:
    sid = series_id(api, "train.loss")
    body = get(api, "/api/v1/query/raw", series=sid, start=T0 + 498, end=T0 + 501)
    assert body["name"] == "train.loss" and body["labels"] == {"run": "r1"}
    assert body["step"] == [498, 499, 500, 501]
    assert body["value"] == [498.0, 499.0, "NaN", 501.0]
    assert get(api, "/api/v1/query/raw", series=sid, limit=3)["step"] == [0, 1, 2]


def test_downsample_gives_exact_min_max_last_per_bucket(api: httpx.Client) -> None:
    sid = series_id(api, "train.loss")
    body = get(api, "/api/v1/query/downsample", series=sid, points=10)
    assert body["ts"] == [T0 + 100 * j for j in range(10)]
    assert body["count"] == [100] * 10
    assert body["min"] == [100.0 * j + (j == 5) for j in range(10)]  # NaN at 500 is skipped
    assert body["max"] == [100.0 * j + 99 for j in range(10)]
    assert body["last"] == [100.0 * j + 99 for j in range(10)]
    window = get(api, "/api/v1/query/downsample", series=sid, start=T0 + 500, end=T0 + 500)
    assert window["last"] == ["NaN"] and window["min"] == ["NaN"] and window["count"] == [1]


def test_percentiles_per_node(api: httpx.Client) -> None:
    body = get(
        api, "/api/v1/query/percentiles", name="train.step_time_s", run="r1", points=1, by="node"
    )
    assert [g["labels"] for g in body] == [{"node": "node0"}, {"node": "node1"}]
    for group, values in zip(body, (np.arange(1, 201), np.arange(201, 401)), strict=True):
        assert group["count"] == [200]
        assert set(group["q"]) == {"0.5", "0.9", "0.99"}
        for q, got in group["q"].items():
            assert got[0] == pytest.approx(np.quantile(values, float(q)), rel=0.02)
    (everything,) = get(
        api, "/api/v1/query/percentiles", name="train.step_time_s", q="0.5", points=1
    )
    assert everything["labels"] == {} and everything["count"] == [400]
    assert everything["q"]["0.5"][0] == pytest.approx(200.5, rel=0.02)


def test_latest_per_series(api: httpx.Client) -> None:
    (loss,) = get(api, "/api/v1/query/latest", name="loss")
    assert loss == {
        "name": "train.loss",
        "labels": {"run": "r1"},
        "ts": T0 + 999,
        "step": 999,
        "value": 999.0,
    }
    ranks = get(api, "/api/v1/query/latest", name="train.step_time_s", label="node:node1")
    assert sorted(r["value"] for r in ranks) == [300.0, 400.0]
    assert {r["step"] for r in ranks} == {NO_STEP}


def test_events_filter_by_kind(api: httpx.Client) -> None:
    ingested = [e for e in get(api, "/api/v1/events", run="r1") if e["kind"] != "alert"]
    assert [e["kind"] for e in ingested] == ["checkpoint", "log"]  # alerts: the NaN at step 500
    (log,) = get(api, "/api/v1/events", run="r1", kind="log")
    assert log == {"ts": T0 + 6, "kind": "log", "text": "hi", "labels": {"run": "r1"}, "data": {}}
    assert get(api, "/api/v1/events", run="r1", start=T0 + 5.5, end=T0 + 100) == [log]


def test_a_series_without_data_in_range_is_empty(api: httpx.Client) -> None:
    sid = series_id(api, "train.loss")
    body = get(api, "/api/v1/query/downsample", series=sid, start=T0 + 5000)
    assert body["ts"] == [] and body["count"] == []
    assert get(api, "/api/v1/query/percentiles", name="train.step_time_s", start=T0 + 5000) == []


@pytest.mark.parametrize(
    ("path", "params", "status", "message"),
    [
        ("/api/v1/query/raw", {"series": 999}, 404, "unknown series 999"),
        ("/api/v1/query/downsample", {"series": 999}, 404, "unknown series 999"),
        ("/api/v1/query/raw", {"series": "abc"}, 400, "series: Input should be a valid integer"),
        ("/api/v1/query/raw", {}, 400, "series: Field required"),
        ("/api/v1/query/raw", {"series": 0, "limit": 0}, 400, "limit:"),
        ("/api/v1/query/raw", {"series": 0, "limit": 2**63}, 400, "limit:"),  # beyond 64 bits
        ("/api/v1/query/raw", {"series": 0, "start": 5, "end": 1}, 400, "is before start"),
        ("/api/v1/query/downsample", {"series": 0, "points": 0}, 400, "points must be between"),
        (
            "/api/v1/query/downsample",
            {"series": 0, "points": 10_001},
            400,
            "points must be between",
        ),
        (
            "/api/v1/query/downsample",
            {"series": 0, "start": "inf"},
            400,
            "start must be a finite number",
        ),
        (  # finite, but its buckets would overflow 64-bit integers
            "/api/v1/query/downsample",
            {"series": 0, "start": -1e308, "end": 1e308},
            400,
            "start must be a finite number of seconds within",
        ),
        ("/api/v1/query/percentiles", {"name": "x", "q": "0.5,2"}, 400, "outside [0, 1]"),
        ("/api/v1/query/percentiles", {"name": "x", "q": "median"}, 400, "q must be"),
        ("/api/v1/query/percentiles", {}, 400, "name: Field required"),
        ("/api/v1/series", {"label": "node"}, 400, "must look like key:value"),
        ("/api/v1/series", {"name": "bad name"}, 400, "invalid metric name"),
        ("/api/v1/events", {"limit": 0}, 400, "limit:"),
        ("/api/v1/nothing-here", {}, 404, "Not Found"),
    ],
)
def test_bad_parameters_say_what_is_wrong(
    api: httpx.Client, path: str, params: dict[str, Any], status: int, message: str
) -> None:
    response = api.get(path, params=params)
    assert response.status_code == status
    assert message in response.json()["error"]
