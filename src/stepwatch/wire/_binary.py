"""The binary batch format (SWB v1): a small JSON header plus raw little-endian columns.

Why this shape: the columns decode with ``numpy.frombuffer`` without copying,
the header stays readable in a hex dump, and a CRC32 over the whole frame
turns any truncation or corruption into a clear error instead of bad data.

Layout (all integers little-endian)::

    0      3   magic  b"SWB"
    3      1   version (1)
    4      4   header length H (u32)
    8      H   header: UTF-8 JSON {"source", "seq", "n", "keys": [[name, {labels}]...],
                                   "events": [...]}
    8+H    P   zero padding to a multiple of 8
    ...   8n   value  float64[n]   (NaN and +-Inf kept)
    ...   8n   ts     float64[n]   (seconds since the epoch)
    ...   8n   step   int64[n]     (-1: no step)
    ...   4n   series uint32[n]    (index into header "keys")
    end    4   CRC32 of every byte before it (u32)
"""

from __future__ import annotations

import json
import struct
import sys
import zlib
from collections.abc import Sequence
from typing import Any, TypeGuard

import numpy as np

from ..model import MAX_ABS_TS_S, MAX_INT64, Event, SampleBatch, SeriesKey, is_timestamp
from ._errors import WireError

MAGIC = b"SWB"
VERSION = 1
CONTENT_TYPE = "application/x-stepwatch-batch"

_PREFIX = struct.Struct("<3sBI")
_CRC = struct.Struct("<I")
_LITTLE = sys.byteorder == "little"


def _le(buf: Any, typecode: str) -> bytes:
    """Bytes of an array/ndarray column in little-endian order."""
    if isinstance(buf, np.ndarray):
        return buf.astype(np.dtype(typecode).newbyteorder("<"), copy=False).tobytes()
    if not _LITTLE:  # pragma: no cover - big-endian hosts are rare
        buf = type(buf)(buf.typecode, buf)
        buf.byteswap()
    return buf.tobytes()


def encode(
    source: str,
    seq: int,
    keys: Sequence[tuple[str, dict[str, str]]],
    value: Any,
    ts: Any,
    step: Any,
    series: Any,
    events: Sequence[dict[str, Any]] = (),
) -> bytes:
    """Encode columns (``array.array`` or numpy) into one SWB frame.

    Takes plain arrays so the SDK can encode without building numpy objects;
    ``value``/``ts`` are float64, ``step`` int64, ``series`` uint32.
    """
    n = len(value)
    if not (len(ts) == len(step) == len(series) == n):
        raise WireError("columns must all have the same length")
    header = json.dumps(
        {
            "source": source,
            "seq": seq,
            "n": n,
            "keys": [list(k) for k in keys],
            "events": list(events),
        },
        separators=(",", ":"),
        allow_nan=False,
    ).encode()
    pad = (-(8 + len(header))) % 8
    parts = [
        _PREFIX.pack(MAGIC, VERSION, len(header)),
        header,
        b"\0" * pad,
        _le(value, "f8"),
        _le(ts, "f8"),
        _le(step, "i8"),
        _le(series, "u4"),
    ]
    body = b"".join(parts)
    return body + _CRC.pack(zlib.crc32(body))


def encode_batch(batch: SampleBatch) -> bytes:
    """Encode a SampleBatch (the server-side and test-side form)."""
    return encode(
        batch.source,
        batch.seq,
        [(k.name, dict(k.labels)) for k in batch.keys],
        batch.value,
        batch.ts,
        batch.step,
        batch.series,
        [e.as_dict() for e in batch.events],
    )


def decode(frame: bytes | memoryview) -> SampleBatch:
    """Decode and fully validate one SWB frame; raise WireError saying what is wrong."""
    view = memoryview(frame)
    if len(view) < _PREFIX.size + _CRC.size:
        raise WireError(f"batch too short ({len(view)} bytes): truncated or not a stepwatch batch")
    magic, version, hlen = _PREFIX.unpack_from(view, 0)
    if magic != MAGIC:
        raise WireError("not a stepwatch batch: bad magic (expected b'SWB')")
    if version != VERSION:
        raise WireError(f"unsupported batch version {version}: this server reads version {VERSION}")
    (crc,) = _CRC.unpack_from(view, len(view) - _CRC.size)
    if zlib.crc32(view[: -_CRC.size]) != crc:
        raise WireError("checksum mismatch: the batch is truncated or corrupted")
    start = _PREFIX.size
    if start + hlen > len(view) - _CRC.size:
        raise WireError(f"header length {hlen} runs past the end of the batch")
    try:
        header = json.loads(bytes(view[start : start + hlen]))
    except ValueError as exc:
        raise WireError(f"header is not valid JSON: {exc}") from None
    source, seq, n, raw_keys, raw_events = _header_fields(header)
    offset = start + hlen + (-(start + hlen)) % 8
    expected = offset + n * 28 + _CRC.size
    if expected != len(view):
        raise WireError(f"batch declares {n} samples ({expected} bytes) but is {len(view)} bytes")
    cols = {}
    for name, dtype in (("value", "<f8"), ("ts", "<f8"), ("step", "<i8"), ("series", "<u4")):
        cols[name] = np.frombuffer(view, dtype=dtype, count=n, offset=offset)
        offset += n * np.dtype(dtype).itemsize
    batch = SampleBatch(
        source=source,
        seq=seq,
        keys=[_key(k) for k in raw_keys],
        series=cols["series"],
        ts=cols["ts"],
        step=cols["step"],
        value=cols["value"],
        events=[event_from_dict(e) for e in raw_events],
    )
    try:
        batch.check()
    except ValueError as exc:
        raise WireError(str(exc)) from None
    return batch


def _header_fields(header: Any) -> tuple[str, int, int, list[Any], list[Any]]:
    if not isinstance(header, dict):
        raise WireError("header must be a JSON object")
    source, seq, n = header.get("source"), header.get("seq"), header.get("n")
    keys, events = header.get("keys"), header.get("events", [])
    if not isinstance(source, str) or not source:
        raise WireError("header field 'source' must be a non-empty string")
    if not is_count(seq):
        raise WireError(f"header field 'seq' must be a non-negative integer up to {MAX_INT64}")
    if not is_count(n):
        raise WireError(f"header field 'n' must be a non-negative integer up to {MAX_INT64}")
    if not isinstance(keys, list):
        raise WireError("header field 'keys' must be a list of [name, labels]")
    if not isinstance(events, list):
        raise WireError("header field 'events' must be a list")
    return source, seq, n, keys, events


def is_count(raw: Any) -> TypeGuard[int]:
    """A JSON integer that the store's 64-bit columns hold, and no negative one (seq, step)."""
    return isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= MAX_INT64


def _key(raw: Any) -> SeriesKey:
    if not (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[1], dict)):
        raise WireError(f"series key must be [name, {{labels}}], got {raw!r:.80}")
    try:
        return SeriesKey.of(raw[0], raw[1])
    except (TypeError, ValueError) as exc:
        raise WireError(f"bad series key: {exc}") from None


def event_from_dict(raw: Any) -> Event:
    """Validate one event object (shared by the binary and JSON formats)."""
    if not isinstance(raw, dict):
        raise WireError("each event must be a JSON object")
    ts, kind = raw.get("ts"), raw.get("kind")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not is_timestamp(ts):
        raise WireError(
            f"event field 'ts' must be a finite number of seconds within ±{MAX_ABS_TS_S:g}"
        )
    if not isinstance(kind, str) or not kind:
        raise WireError("event field 'kind' must be a non-empty string")
    text, labels, data = raw.get("text", ""), raw.get("labels", {}), raw.get("data", {})
    if not isinstance(text, str):
        raise WireError("event field 'text' must be a string")
    if not isinstance(labels, dict) or not isinstance(data, dict):
        raise WireError("event fields 'labels' and 'data' must be objects")
    try:
        SeriesKey.of("event", labels)
    except (TypeError, ValueError) as exc:
        raise WireError(f"bad event label: {exc}") from None
    return Event(
        ts=float(ts), kind=kind, text=text, labels={k: str(v) for k, v in labels.items()}, data=data
    )
