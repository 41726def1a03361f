"""Record framing for spool segments: ``u32 length | u32 crc32 | payload``.

Why: a process killed mid-write leaves a short or garbled tail; the length and
checksum make that tail detectable so it is skipped instead of misread.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

HEADER = struct.Struct("<II")

#: A length above this is garbage, not a record (batches are far smaller).
MAX_PAYLOAD = 1 << 30


def frame(payload: bytes) -> bytes:
    """One record: header plus payload, ready to append."""
    if not payload:
        raise ValueError("a spool record needs a non-empty payload")
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"a spool record is limited to {MAX_PAYLOAD} bytes")
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def iter_records(data: bytes, base: int = 0) -> Iterator[tuple[int, bytes]]:
    """Yield ``(end offset, payload)`` for each intact record, stopping at the first bad one.

    ``base`` is the file offset of ``data[0]``. A zero length is bad too: a
    zero-filled tail (left by some file systems after a crash) is not a record.
    """
    view = memoryview(data)
    pos = 0
    while pos + HEADER.size <= len(view):
        length, crc = HEADER.unpack_from(view, pos)
        start, end = pos + HEADER.size, pos + HEADER.size + length
        if length == 0 or length > MAX_PAYLOAD or end > len(view):
            return
        payload = bytes(view[start:end])
        if zlib.crc32(payload) != crc:
            return
        pos = end
        yield base + end, payload


def valid_end(data: bytes) -> int:
    """Offset just past the last intact record of a segment's bytes."""
    return max((end for end, _ in iter_records(data)), default=0)
