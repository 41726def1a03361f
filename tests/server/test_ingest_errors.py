"""Every malformed batch gets the right 4xx, a message naming the problem, and stores nothing."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from stepwatch.wire import BINARY_CONTENT_TYPE, encode, encode_batch

from .conftest import make_batch

MAX_BODY = 64 * 1024
SWB = BINARY_CONTENT_TYPE
JSON = "application/json"


@pytest.fixture(scope="module")
def collector(module_collector_factory: Any) -> Any:
    return module_collector_factory(extra_args=("--max-body-bytes", str(MAX_BODY)))


def frame(source: str) -> bytes:
    return encode_batch(make_batch(source, seq=1, run=source))


def recrc(body: bytes) -> bytes:
    """The frame with its checksum fixed, so a later check is the one that fails."""
    return body[:-4] + struct.pack("<I", zlib.crc32(body[:-4]))


def with_version(body: bytes, version: int) -> bytes:
    return recrc(body[:3] + bytes([version]) + body[4:])


def flip_byte(body: bytes) -> bytes:
    at = len(body) - 20
    return body[:at] + bytes([body[at] ^ 0xFF]) + body[at + 1 :]


def bad_key(source: str, name: str, labels: dict[str, Any]) -> bytes:
    one = np.ones(1)
    return encode(
        source, 1, [(name, labels)], one, one, np.zeros(1, np.int64), np.zeros(1, np.uint32)
    )


def bad_index(source: str) -> bytes:
    one = np.ones(1)
    series = np.array([3], np.uint32)
    return encode(
        source, 1, [("train.loss", {"run": source})], one, one, np.zeros(1, np.int64), series
    )


def json_doc(source: str, /, **changes: Any) -> bytes:
    doc: dict[str, Any] = {
        "source": source,
        "seq": 1,
        "samples": [{"name": "loss", "labels": {"run": source}, "ts": 1.0, "value": 1.0}],
    }
    doc.update(changes)
    return json.dumps(doc).encode()


def json_sample(source: str, **fields: Any) -> bytes:
    sample = {"name": "loss", "labels": {"run": source}, "ts": 1.0, "value": 1.0, **fields}
    return json_doc(source, samples=[sample])


def chunks(body: bytes) -> Iterator[bytes]:
    """A body sent chunked, without Content-Length, so only counting while reading can catch it."""
    for at in range(0, len(body), 8192):
        yield body[at : at + 8192]


Case = tuple[str, Callable[[str], Any], str, int, str]

CASES: list[Case] = [
    ("garbage", lambda s: b"this is not a batch at all", SWB, 400, "bad magic"),
    ("short", lambda s: b"SWB", SWB, 400, "too short"),
    ("truncated", lambda s: frame(s)[:-100], SWB, 400, "checksum mismatch"),
    ("bad-crc", lambda s: flip_byte(frame(s)), SWB, 400, "checksum mismatch"),
    ("version", lambda s: with_version(frame(s), 2), SWB, 400, "unsupported batch version 2"),
    ("bad-name", lambda s: bad_key(s, "bad name!", {}), SWB, 400, "invalid metric name"),
    ("bad-label", lambda s: bad_key(s, "x", {"no-dash": "1"}), SWB, 400, "invalid label name"),
    ("index", bad_index, SWB, 400, "out of range"),
    ("json-garbage", lambda s: b"{not json", JSON, 400, "not valid JSON"),
    ("json-seq", lambda s: json_doc(s, seq="1"), JSON, 400, "'seq' must be a non-negative"),
    ("json-source", lambda s: json_doc(s, source=5), JSON, 400, "'source' must be a non-empty"),
    ("json-samples", lambda s: json_doc(s, samples={}), JSON, 400, "must be lists"),
    ("json-value", lambda s: json_sample(s, value=[1]), JSON, 400, "value must be a number"),
    ("json-ts", lambda s: json_sample(s, ts="now"), JSON, 400, "'ts' must be a finite number"),
    ("json-step", lambda s: json_sample(s, step=-3), JSON, 400, "'step' must be a non-negative"),
    ("json-name", lambda s: json_sample(s, name="9lives"), JSON, 400, "invalid metric name"),
    ("json-version", lambda s: json_doc(s, version=2), JSON, 400, "unsupported batch version"),
    ("text", lambda s: frame(s), "text/plain", 415, "unsupported content type 'text/plain'"),
    ("no-type", lambda s: frame(s), "", 415, "unsupported content type"),
    ("too-big", lambda s: b"x" * (MAX_BODY + 1), SWB, 413, f"exceeds the {MAX_BODY}-byte limit"),
    ("too-big-chunked", lambda s: chunks(b"x" * 3 * MAX_BODY), SWB, 413, "exceeds the"),
]


@pytest.mark.parametrize(
    ("source", "body", "content_type", "status", "message"), CASES, ids=[c[0] for c in CASES]
)
def test_rejected_and_nothing_stored(
    collector: Any,
    source: str,
    body: Callable[[str], Any],
    content_type: str,
    status: int,
    message: str,
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    with httpx.Client(base_url=collector.url, timeout=30) as client:
        response = client.post("/api/v1/ingest", content=body(source), headers=headers)
        assert response.status_code == status
        assert message in response.json()["error"]
        assert client.get("/api/v1/series", params={"run": source}).json() == []
        retry = client.post("/api/v1/ingest", content=frame(source), headers={"Content-Type": SWB})
        assert retry.json()["applied"] is True  # the rejected batch did not consume its seq
