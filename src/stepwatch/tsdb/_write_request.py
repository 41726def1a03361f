"""Prometheus remote write 1.0's body: a ``WriteRequest`` protobuf, snappy-compressed (block
format). Written by hand: four messages, and the samples encoded a whole series at a time with
numpy rather than a message at a time.

    WriteRequest { repeated TimeSeries timeseries = 1; }
    TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
    Label        { string name = 1; string value = 2; }
    Sample       { double value = 1; int64 timestamp = 2; }   // milliseconds

A sample's timestamp is a varint padded to the width of the largest in its series (protobuf
readers take a varint of any width up to ten bytes), so that every sample of a series has the
same size and a series is one array operation.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import cramjam
import numpy as np

__all__ = ["TimeSeries", "compress", "write_request"]

_LEN, _FIXED64, _VARINT = 2, 1, 0


@dataclass(frozen=True, slots=True)
class TimeSeries:
    """One series' labels (``__name__`` among them, sorted by name) and its samples in time
    order: milliseconds since the epoch (never negative) and values."""

    labels: Sequence[tuple[str, str]]
    ts_ms: np.ndarray
    value: np.ndarray


def write_request(series: Iterable[TimeSeries]) -> bytes:
    """The ``WriteRequest`` of these series, uncompressed."""
    return b"".join(_field(1, _series(s)) for s in series)


def compress(body: bytes) -> bytes:
    """Snappy's block format, as remote write sends it."""
    return bytes(cramjam.snappy.compress_raw(body))


def _series(one: TimeSeries) -> bytes:
    labels = _labels(tuple(one.labels))
    return labels + _samples(np.asarray(one.ts_ms, np.int64), np.asarray(one.value, np.float64))


@functools.lru_cache(maxsize=65_536)
def _labels(labels: tuple[tuple[str, str], ...]) -> bytes:
    """A series' labels as fields, kept for the next batch of the same series."""
    return b"".join(
        _field(1, _field(1, name.encode()) + _field(2, value.encode())) for name, value in labels
    )


def _samples(ts_ms: np.ndarray, value: np.ndarray) -> bytes:
    """Every sample as a length-delimited field 2 of the series, all of one width."""
    n = len(ts_ms)
    if n == 0:
        return b""
    width = max(1, (int(ts_ms.max()).bit_length() + 6) // 7)
    size = 1 + 8 + 1 + width  # value's tag and 8 bytes, timestamp's tag and varint
    row = np.zeros((n, 2 + size), np.uint8)
    row[:, 0] = (2 << 3) | _LEN
    row[:, 1] = size
    row[:, 2] = (1 << 3) | _FIXED64
    row[:, 3:11] = value.astype("<f8").view(np.uint8).reshape(n, 8)
    row[:, 11] = (2 << 3) | _VARINT
    shifts = 7 * np.arange(width, dtype=np.uint64)
    groups = (ts_ms.astype(np.uint64)[:, None] >> shifts[None, :]) & np.uint64(0x7F)
    groups[:, :-1] |= np.uint64(0x80)  # every byte but the last says another follows
    row[:, 12:] = groups.astype(np.uint8)
    return row.tobytes()


def _field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | _LEN) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)
