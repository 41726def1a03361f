"""Read positions survive a restart, never move back, and a bad file is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepwatch.fleet import Member
from stepwatch.fleet._offsets import OffsetBook


def test_positions_survive_a_restart_and_never_move_back(tmp_path: Path) -> None:
    now = [0.0]
    book = OffsetBook(tmp_path / "offsets.json", every_s=1.0, monotonic=lambda: now[0])
    assert book.next(3) is None
    book.done(3, 10)  # the first is saved at once
    book.done(3, 11)  # within the second: kept in memory
    book.done(3, 5)  # a message read again: the position stays
    assert book.next(3) == 12
    assert OffsetBook(tmp_path / "offsets.json").next(3) == 11
    book.save()
    assert OffsetBook(tmp_path / "offsets.json").next(3) == 12


def test_a_file_that_is_no_offsets_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a partition offsets file"):
        OffsetBook(path)


def test_heartbeats_round_trip_and_anything_else_is_refused() -> None:
    member = Member("c0", "http://10.0.0.1:7070", (1, 3))
    assert Member.decode(member.encode()) == member
    for junk in (b"hello", b"[]", b'{"id": "c0"}', b'{"id": "c0", "url": "u", "partitions": "x"}'):
        with pytest.raises(ValueError, match="not a fleet heartbeat"):
            Member.decode(junk)
