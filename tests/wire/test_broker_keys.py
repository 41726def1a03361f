"""A broker message's key is its run: the same for the run's record, its end and its batches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepwatch.model import Event, SampleBatch, SeriesKey
from stepwatch.wire import (
    BINARY_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    Route,
    encode_batch,
    is_broker_url,
    partition_of,
    routing_key,
)


def _batch(labels: dict[str, str], events: list[Event] | None = None) -> bytes:
    keys = [SeriesKey.of("train.loss", labels)]
    return encode_batch(
        SampleBatch(
            "src-1",
            4,
            keys,
            np.array([0], dtype=np.uint32),
            np.array([1.0]),
            np.array([1.7e9]),
            np.array([3], dtype=np.int64),
            events or [],
        )  # fmt: skip
    )


def test_a_run_s_record_end_and_batches_share_one_key() -> None:
    record = json.dumps({"id": "run-7", "project": "p"}).encode()
    assert routing_key("/api/v1/runs", record, JSON_CONTENT_TYPE) == Route("run-7")
    assert routing_key("/api/v1/runs/run-7/finish", b"{}", JSON_CONTENT_TYPE) == Route("run-7")
    batch = _batch({"run": "run-7", "rank": "0"})
    assert routing_key("/api/v1/ingest", batch, BINARY_CONTENT_TYPE) == Route("run-7", 1, "src-1")


def test_a_batch_of_no_run_is_keyed_by_its_source() -> None:
    assert routing_key("/api/v1/ingest", _batch({"node": "n0"}), BINARY_CONTENT_TYPE).key == "src-1"
    tagged = _batch({"node": "n0"}, [Event(1.7e9, "log", "hi", {"run": "r9"})])
    assert routing_key("/api/v1/ingest", tagged, BINARY_CONTENT_TYPE).key == "r9"


def test_what_cannot_be_keyed_is_an_error() -> None:
    with pytest.raises(ValueError, match="binary batches"):
        routing_key("/api/v1/ingest", b"{}", JSON_CONTENT_TYPE)
    with pytest.raises(ValueError):
        routing_key("/api/v1/ingest", b"SWB\x01junk", BINARY_CONTENT_TYPE)


def test_partitions_are_stable_and_spread() -> None:
    assert partition_of("run-7", 16) == partition_of("run-7", 16)
    spread = {partition_of(f"run-{i}", 16) for i in range(200)}
    assert spread == set(range(16))
    assert is_broker_url("amqp://u:p@h:5672/") and is_broker_url("amqps://h")
    assert not is_broker_url("http://h:7070")
