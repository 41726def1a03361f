"""The spool on real files: appends, torn tails, acks across reopen, the cap, rotation."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stepwatch.spool import Position, Spool
from stepwatch.spool._records import HEADER


def payloads(spool: Spool, start: Position | None = None) -> list[bytes]:
    return [p for _, p in spool.records(start)]


def segments(path: Path) -> list[Path]:
    return sorted(path.glob("*.seg"))


def test_appended_records_read_back_in_order(tmp_path: Path) -> None:
    with Spool(tmp_path) as spool:
        for i in range(5):
            assert spool.append(f"batch {i}".encode())
        assert payloads(spool) == [f"batch {i}".encode() for i in range(5)]
        assert spool.pending()
    with Spool(tmp_path) as reopened:
        assert payloads(reopened) == [f"batch {i}".encode() for i in range(5)]


def test_truncated_tail_is_skipped_and_appends_go_to_a_new_segment(tmp_path: Path) -> None:
    with Spool(tmp_path) as spool:
        for i in range(3):
            spool.append(f"batch {i}".encode())
    (seg,) = segments(tmp_path)
    os.truncate(seg, seg.stat().st_size - 3)  # the kill landed mid-record
    with Spool(tmp_path) as spool:
        assert payloads(spool) == [b"batch 0", b"batch 1"]
        spool.append(b"after restart")
        assert payloads(spool) == [b"batch 0", b"batch 1", b"after restart"]
    assert len(segments(tmp_path)) == 2
    assert seg.stat().st_size == len(seg.read_bytes())  # the torn segment was not appended to


def test_flipped_byte_drops_that_record_and_later_ones_of_its_segment_only(tmp_path: Path) -> None:
    with Spool(tmp_path) as spool:
        for i in range(3):
            spool.append(f"batch {i}".encode())
    (seg,) = segments(tmp_path)
    data = bytearray(seg.read_bytes())
    second = HEADER.size + len(b"batch 0")
    data[second + HEADER.size] ^= 0x01
    seg.write_bytes(bytes(data))
    with Spool(tmp_path) as spool:
        assert payloads(spool) == [b"batch 0"]
        spool.append(b"new")
        assert payloads(spool) == [b"batch 0", b"new"]


def test_acked_position_survives_reopen(tmp_path: Path) -> None:
    with Spool(tmp_path) as spool:
        for i in range(3):
            spool.append(f"batch {i}".encode())
        positions = [pos for pos, _ in spool.records()]
        spool.ack(positions[1])
    with Spool(tmp_path) as spool:
        assert spool.acked == positions[1]
        assert payloads(spool) == [b"batch 2"]
        spool.ack(positions[2])
        assert not spool.pending()
    with Spool(tmp_path) as spool:
        assert payloads(spool) == []
        spool.append(b"more")
        assert payloads(spool) == [b"more"]


def test_acks_never_move_backwards(tmp_path: Path) -> None:
    with Spool(tmp_path) as spool:
        spool.append(b"a")
        spool.append(b"b")
        first, second = (pos for pos, _ in spool.records())
        spool.ack(second)
        spool.ack(first)
        assert spool.acked == second
    assert json.loads((tmp_path / "acked.json").read_text())["offset"] == second.offset


def test_segments_rotate_and_acknowledged_ones_are_deleted(tmp_path: Path) -> None:
    with Spool(tmp_path, segment_bytes=50) as spool:
        for i in range(10):
            spool.append(bytes([65 + i]) * 60)
        assert len(segments(tmp_path)) == 10
        positions = [pos for pos, _ in spool.records()]
        spool.ack(positions[6])
        assert len(segments(tmp_path)) == 3  # the segment holding record 6 is spent too
        assert payloads(spool) == [bytes([65 + i]) * 60 for i in range(7, 10)]


def test_cap_refuses_records_until_acknowledged_space_is_freed(tmp_path: Path) -> None:
    with Spool(tmp_path, max_bytes=1000) as spool:
        results = [spool.append(b"z" * 100) for _ in range(20)]
        assert results.count(True) == 9 and not any(results[9:])
        assert spool.size_bytes <= 1000
        last = [pos for pos, _ in spool.records()][-1]
        spool.ack(last)
        assert spool.append(b"z" * 100)


def test_a_spool_that_was_never_written_has_nothing_pending(tmp_path: Path) -> None:
    with Spool(tmp_path / "new") as spool:
        assert not spool.pending()
        assert payloads(spool) == []
        assert spool.written == spool.acked or spool.written.offset == 0
