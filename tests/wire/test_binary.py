"""SWB v1: exact round trips, and every kind of damage reported as a WireError that says what."""

from __future__ import annotations

import array
import math
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepwatch.model import Event, SampleBatch, SeriesKey
from stepwatch.wire import WireError, decode, encode, encode_batch


def _frame(values: list[float], *, seq: int = 3) -> bytes:
    n = len(values)
    return encode(
        "src-1",
        seq,
        [("train.loss", {"run": "r1"}), ("gpu.temp_c", {"run": "r1", "node": "n0", "gpu": "2"})],
        array.array("d", values),
        array.array("d", [1000.0 + i for i in range(n)]),
        array.array("q", [i if i % 2 == 0 else -1 for i in range(n)]),
        array.array("I", [i % 2 for i in range(n)]),
        [{"ts": 1000.0, "kind": "checkpoint", "text": "saved", "labels": {"rank": "0"}}],
    )


def test_round_trip_keeps_every_column_and_non_finite_values() -> None:
    values = [2.5, math.nan, math.inf, -math.inf, 0.0, -1e-300]
    batch = decode(_frame(values))
    assert (batch.source, batch.seq, len(batch)) == ("src-1", 3, 6)
    assert batch.keys[1] == SeriesKey.of("gpu.temp_c", {"run": "r1", "node": "n0", "gpu": 2})
    np.testing.assert_array_equal(batch.value, np.array(values))
    assert list(batch.step) == [0, -1, 2, -1, 4, -1]
    assert list(batch.series) == [0, 1, 0, 1, 0, 1]
    assert batch.events == [Event(1000.0, "checkpoint", "saved", {"rank": "0"}, {})]


def test_numpy_columns_encode_like_arrays() -> None:
    batch = decode(_frame([1.0, 2.0]))
    again = decode(encode_batch(batch))
    assert (again.source, again.seq, again.keys, again.events) == (
        batch.source,
        batch.seq,
        batch.keys,
        batch.events,
    )
    for col in ("series", "ts", "step", "value"):
        np.testing.assert_array_equal(getattr(again, col), getattr(batch, col))


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=200))
def test_any_float_survives(values: list[float]) -> None:
    got = decode(_frame(values)).value
    np.testing.assert_array_equal(got, np.array(values, dtype=np.float64))


def _recrc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f[:40], "truncated or corrupted"),
        (lambda f: f[:5], "too short"),
        (lambda f: b"XYZ" + f[3:], "bad magic"),
        (lambda f: f[:-5] + bytes([f[-5] ^ 0xFF]) + f[-4:], "checksum mismatch"),
        (lambda f: _recrc(f[:3] + b"\x02" + f[4:-4]), "unsupported batch version 2"),
        (lambda f: _recrc(f[:-12]), "declares 2 samples"),
        (lambda f: _recrc(f[:4] + struct.pack("<I", 10**6) + f[8:-4]), "runs past the end"),
        (lambda f: b"\x00" * 64, "bad magic"),
    ],
)
def test_damaged_frames_are_rejected_with_a_reason(mutate, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode(mutate(_frame([1.0, 2.0])))


def _with_header(header: bytes, n: int = 0) -> bytes:
    body = struct.pack("<3sBI", b"SWB", 1, len(header)) + header
    body += b"\0" * ((-len(body)) % 8) + b"\0" * (28 * n)
    return _recrc(body)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"[1]", "must be a JSON object"),
        (b'{"source":"","seq":0,"n":0,"keys":[]}', "'source'"),
        (b'{"source":"s","seq":-1,"n":0,"keys":[]}', "'seq'"),
        (b'{"source":"s","seq":true,"n":0,"keys":[]}', "'seq'"),
        (b'{"source":"s","seq":0,"n":"2","keys":[]}', "'n'"),
        (b'{"source":"s","seq":0,"n":0,"keys":{}}', "'keys'"),
        (b'{"source":"s","seq":0,"n":0,"keys":[["bad name!",{}]]}', "invalid metric name"),
        (b'{"source":"s","seq":0,"n":0,"keys":[["x",{"a b":"1"}]]}', "invalid label name"),
        (b'{"source":"s","seq":0,"n":0,"keys":[],"events":[{"kind":"log"}]}', "'ts'"),
    ],
)
def test_bad_headers_are_rejected_with_a_reason(header: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode(_with_header(header))


def test_series_index_out_of_range_is_rejected() -> None:
    frame = encode(
        "s",
        0,
        [("x", {})],
        array.array("d", [1.0]),
        array.array("d", [1.0]),
        array.array("q", [0]),
        array.array("I", [5]),
    )
    with pytest.raises(WireError, match="series index 5 out of range"):
        decode(frame)


def test_non_finite_timestamps_are_rejected() -> None:
    frame = encode(
        "s",
        0,
        [("x", {})],
        array.array("d", [1.0]),
        array.array("d", [math.nan]),
        array.array("q", [0]),
        array.array("I", [0]),
    )
    with pytest.raises(WireError, match="timestamps must be finite"):
        decode(frame)


@pytest.mark.parametrize(
    ("seq", "ts", "message"),
    [(2**63, 1.0, "'seq' must be a non-negative integer"), (0, 1e300, "within ±1e\\+11")],
)
def test_numbers_beyond_the_stores_columns_are_rejected(seq: int, ts: float, message: str) -> None:
    frame = encode(
        "s",
        seq,
        [("x", {})],
        array.array("d", [1.0]),
        array.array("d", [ts]),
        array.array("q", [0]),
        array.array("I", [0]),
    )
    with pytest.raises(WireError, match=message):
        decode(frame)


def test_columns_of_unequal_length_cannot_be_encoded() -> None:
    with pytest.raises(WireError, match="same length"):
        encode(
            "s",
            0,
            [],
            array.array("d", [1.0]),
            array.array("d", []),
            array.array("q", []),
            array.array("I", []),
        )


def test_sample_batch_check_names_the_bad_column() -> None:
    batch = SampleBatch(
        "s",
        0,
        [SeriesKey("x")],
        np.zeros(2, np.uint32),
        np.zeros(1),
        np.zeros(2, np.int64),
        np.zeros(2),
    )
    with pytest.raises(ValueError, match="column 'ts' has 1 rows, expected 2"):
        batch.check()
