"""Record framing: intact records read back; a torn or garbled tail stops reading."""

from __future__ import annotations

import pytest

from stepwatch.spool._records import HEADER, frame, iter_records, valid_end

PAYLOADS = [b"first", b"second record", b"x" * 1000]
DATA = b"".join(frame(p) for p in PAYLOADS)


def test_records_round_trip_with_their_end_offsets() -> None:
    records = list(iter_records(DATA, base=100))
    assert [p for _, p in records] == PAYLOADS
    assert records[-1][0] == 100 + len(DATA)
    assert valid_end(DATA) == len(DATA)


@pytest.mark.parametrize("cut", [1, HEADER.size - 1, HEADER.size + 3])
def test_a_short_tail_is_skipped(cut: int) -> None:
    torn = DATA + frame(b"the torn one")[:cut]
    assert [p for _, p in iter_records(torn)] == PAYLOADS
    assert valid_end(torn) == len(DATA)


def test_a_flipped_byte_stops_reading_at_that_record() -> None:
    second = len(frame(PAYLOADS[0]))
    corrupt = bytearray(DATA)
    corrupt[second + HEADER.size + 2] ^= 0xFF
    assert [p for _, p in iter_records(bytes(corrupt))] == PAYLOADS[:1]


def test_zero_filled_and_absurd_headers_are_not_records() -> None:
    assert list(iter_records(DATA + b"\0" * 64))[-1][1] == PAYLOADS[-1]
    assert valid_end(DATA + b"\0" * 64) == len(DATA)
    garbage = HEADER.pack(0xFFFFFFFF, 0) + b"junk"
    assert valid_end(DATA + garbage) == len(DATA)


def test_empty_payloads_cannot_be_framed() -> None:
    with pytest.raises(ValueError):
        frame(b"")
