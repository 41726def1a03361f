"""Ingest over real HTTP into the real collector process, read back exactly through the API."""

from __future__ import annotations

import math
import threading
from typing import Any

import httpx
import numpy as np

from stepwatch.model import Event, SampleBatch
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch, json_number

from .conftest import AWKWARD, make_batch

SWB = {"Content-Type": BINARY_CONTENT_TYPE}


def post(url: str, batch: SampleBatch) -> httpx.Response:
    return httpx.post(f"{url}/api/v1/ingest", content=encode_batch(batch), headers=SWB, timeout=30)


def series_of(client: httpx.Client, **params: Any) -> dict[str, dict[str, Any]]:
    """The series a query finds, by name."""
    found = client.get("/api/v1/series", params=params).json()
    return {s["name"]: s for s in found}


def expected(batch: SampleBatch, index: int) -> dict[str, list[Any]]:
    """What /query/raw must answer for series ``index`` of ``batch``."""
    rows = batch.series == index
    return {
        "ts": batch.ts[rows].tolist(),
        "step": batch.step[rows].tolist(),
        "value": [json_number(v) for v in batch.value[rows].tolist()],
    }


def raw(client: httpx.Client, series_id: int) -> dict[str, list[Any]]:
    body = client.get("/api/v1/query/raw", params={"series": series_id}).json()
    return {k: body[k] for k in ("ts", "step", "value")}


def test_binary_batch_round_trips_exactly(server) -> None:
    batch = make_batch(n=len(AWKWARD))
    response = post(server.url, batch)
    assert response.status_code == 200
    assert response.json() == {"applied": True, "source": "src", "seq": 1, "samples": 16}
    with httpx.Client(base_url=server.url) as client:
        found = series_of(client, run="r1")
        assert {n: s["labels"] for n, s in found.items()} == {
            "train.loss": {"run": "r1", "rank": "0"},
            "gpu.temp_c": {"run": "r1", "node": "node0", "gpu": "0"},
        }
        loss = raw(client, found["train.loss"]["id"])
        temp = raw(client, found["gpu.temp_c"]["id"])
    assert loss == expected(batch, 0)
    assert loss["value"][1:4] == ["NaN", "+Inf", "-Inf"]
    assert math.copysign(1.0, loss["value"][4]) == -1.0  # -0.0 kept
    assert temp == expected(batch, 1)
    assert set(temp["step"]) == {-1}


def test_json_batch_round_trips_with_non_finite_strings(server) -> None:
    doc = {
        "source": "script",
        "seq": 7,
        "samples": [
            {"name": "loss", "labels": {"run": "rj"}, "step": 1, "ts": 10.0, "value": 2.5},
            {"name": "loss", "labels": {"run": "rj"}, "step": 2, "ts": 11.0, "value": "NaN"},
            {"name": "loss", "labels": {"run": "rj"}, "step": 3, "ts": 12.0, "value": "+Inf"},
            {"name": "loss", "labels": {"run": "rj"}, "step": 4, "ts": 13.0, "value": "-Inf"},
        ],
        "events": [{"ts": 12.5, "kind": "log", "text": "hello", "labels": {"run": "rj"}}],
    }
    response = httpx.post(f"{server.url}/api/v1/ingest", json=doc)
    assert response.status_code == 200
    assert response.json() == {"applied": True, "source": "script", "seq": 7, "samples": 4}
    with httpx.Client(base_url=server.url) as client:
        (loss,) = client.get("/api/v1/series", params={"name": "loss"}).json()
        assert loss["name"] == "train.loss"
        assert raw(client, loss["id"]) == {
            "ts": [10.0, 11.0, 12.0, 13.0],
            "step": [1, 2, 3, 4],
            "value": [2.5, "NaN", "+Inf", "-Inf"],
        }
        events = client.get("/api/v1/events", params={"run": "rj", "kind": "log"}).json()
    assert [(e["ts"], e["kind"], e["text"]) for e in events] == [(12.5, "log", "hello")]


def test_a_batch_is_applied_once(server) -> None:
    first, older = make_batch(seq=5), make_batch(seq=4, t0=0.0)
    assert post(server.url, first).json()["applied"] is True
    assert post(server.url, first).json()["applied"] is False
    assert post(server.url, older).json()["applied"] is False
    with httpx.Client(base_url=server.url) as client:
        loss = series_of(client, run="r1")["train.loss"]
        assert raw(client, loss["id"]) == expected(first, 0)


def test_concurrent_senders_are_all_stored(server) -> None:
    results: list[bool] = []
    lock = threading.Lock()

    def send(sender: int) -> None:
        with httpx.Client(base_url=server.url, headers=SWB, timeout=30) as client:
            for seq in range(1, 11):
                frame = encode_batch(make_batch(f"sender{sender}", seq, "rc", n=500, t0=seq * 1e3))
                ok = client.post("/api/v1/ingest", content=frame).json()["applied"]
                with lock:
                    results.append(ok)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 80
    with httpx.Client(base_url=server.url) as client:
        temp = series_of(client, run="rc")["gpu.temp_c"]
        assert len(raw(client, temp["id"])["ts"]) == 80 * 500


def test_acked_batches_survive_a_kill_and_a_graceful_stop(server) -> None:
    event = Event(ts=1.0, kind="checkpoint", text="saved", labels={"run": "r1"}, data={"x": 1})
    assert post(server.url, make_batch(seq=1, events=(event,))).status_code == 200
    server.kill()
    server.restart()
    assert post(server.url, make_batch(seq=1)).json()["applied"] is False
    assert post(server.url, make_batch(seq=2, t0=2e9)).json()["applied"] is True
    assert server.stop() == 0
    assert "listening on " + server.url in server.log()
    server.start()
    with httpx.Client(base_url=server.url) as client:
        temp = series_of(client, run="r1")["gpu.temp_c"]
        values = raw(client, temp["id"])["value"]
        events = client.get("/api/v1/events", params={"run": "r1", "kind": "checkpoint"}).json()
    assert values == np.tile(40.0 + np.arange(8), 2).tolist()
    assert events == [event.as_dict()]
