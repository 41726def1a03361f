"""The batch writer: sequence numbers, and the dropped-samples report once the spool has room."""

from __future__ import annotations

from pathlib import Path

from stepwatch.model import SeriesKey
from stepwatch.sdk._buffer import Buffer, SeriesTable
from stepwatch.sdk._writer import BatchWriter
from stepwatch.spool import Spool
from stepwatch.wire import decode


def test_dropped_samples_are_reported_once_the_spool_has_room(tmp_path: Path) -> None:
    table, buffer = SeriesTable(), Buffer()
    loss = table.intern(SeriesKey.of("train.loss", {"run": "r"}))
    dropped = table.intern(SeriesKey.of("stepwatch.dropped_samples", {"run": "r"}))
    with Spool(tmp_path, max_bytes=2000) as spool:
        writer = BatchWriter(buffer, table, spool, "src", dropped, wall=lambda: 42.0)
        for step in range(10):
            buffer.append([loss] * 20, [float(step)] * 20, 1.0 + step, step)
            writer.flush()
        assert writer.dropped_samples > 0
        frames = [payload for _, payload in spool.records()]
        assert [decode(f).seq for f in frames] == list(range(len(frames)))  # no gaps
        spool.ack([pos for pos, _ in spool.records()][-1])  # the collector took it all
        buffer.append([loss], [99.0], 50.0, 99)
        writer.flush()
        (last,) = [decode(payload) for _, payload in spool.records()]
    assert last.seq == len(frames)
    names = [last.keys[i].name for i in last.series]
    assert names == ["train.loss", "stepwatch.dropped_samples"]
    assert list(last.value) == [99.0, float(writer.dropped_samples)]
    assert list(last.ts) == [50.0, 42.0] and list(last.step) == [99, -1]


def test_an_empty_buffer_writes_nothing(tmp_path: Path) -> None:
    table, buffer = SeriesTable(), Buffer()
    with Spool(tmp_path) as spool:
        writer = BatchWriter(buffer, table, spool, "src", 0, wall=lambda: 0.0)
        writer.flush()
        assert not spool.pending() and writer.seq == 0


def test_closing_a_full_spool_still_records_what_was_dropped(tmp_path: Path) -> None:
    table, buffer = SeriesTable(), Buffer()
    loss = table.intern(SeriesKey.of("train.loss", {"run": "r"}))
    dropped = table.intern(SeriesKey.of("stepwatch.dropped_samples", {"run": "r"}))
    with Spool(tmp_path, max_bytes=600) as spool:
        writer = BatchWriter(buffer, table, spool, "src", dropped, wall=lambda: 42.0)
        for step in range(10):
            buffer.append([loss] * 20, [float(step)] * 20, 1.0 + step, step)
            writer.flush()
        assert writer.dropped_samples > 0
        while spool.append(b"x"):  # full to the last byte: no report fits any more
            pass
        written = spool.size_bytes
        writer.close()
        last = decode([payload for _, payload in spool.records()][-1])
        assert spool.size_bytes > written  # the report went past the cap, once
        writer.close()
        assert decode([payload for _, payload in spool.records()][-1]).seq == last.seq
    assert [last.keys[i].name for i in last.series] == ["stepwatch.dropped_samples"]
    assert list(last.value) == [float(writer.dropped_samples)]
