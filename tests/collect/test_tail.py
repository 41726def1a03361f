"""Following a log file: new lines only, partial lines held, rotation and truncation lose none."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepwatch.collect._source import Reading
from stepwatch.collect._tail import LogTail


class Clock:
    """A hand-driven wall clock: each ``read`` is stamped with the next second."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = 1.0) -> float:
        self.now += seconds
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "train.log"


@pytest.fixture
def tails() -> Iterator[list[LogTail]]:
    """Tails a test opens; each is closed after it, so no file handle leaks."""
    opened: list[LogTail] = []
    yield opened
    for tail in opened:
        tail.close()


def open_tail(tails: list[LogTail], path: Path, clock: Clock, **kwargs: object) -> LogTail:
    tail = LogTail(path, clock=clock, **kwargs)  # type: ignore[arg-type]
    tails.append(tail)
    return tail


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def texts(reading: Reading, kind: str = "log") -> list[str]:
    return [e.text for e in reading.events if e.kind == kind]


def test_starts_at_the_end_and_returns_appended_lines(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    log.write_text("old 1\nold 2\n")
    tail = open_tail(tails, log, clock, labels={"job": "pretrain"})
    assert tail.read(clock.tick()).events == []
    append(log, "new 1\nWARNING: new 2\n")
    reading = tail.read(clock.tick())
    assert texts(reading) == ["new 1", "WARNING: new 2"]
    assert all(e.labels == {"job": "pretrain", "path": str(log)} for e in reading.events)
    assert [e.ts for e in reading.events] == [clock.now, clock.now]
    assert reading.events[1].data == {"level": "warning"}
    assert tail.read(clock.tick()).events == []


def test_from_start_reads_what_is_there(tails: list[LogTail], log: Path, clock: Clock) -> None:
    log.write_text("old 1\nold 2\n")
    tail = open_tail(tails, log, clock, from_start=True)
    assert texts(tail.read(clock.tick())) == ["old 1", "old 2"]


def test_starting_at_the_end_keeps_an_unfinished_last_line_whole(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    log.write_text("old\nstep 9 lo")
    tail = open_tail(tails, log, clock)
    append(log, "ss 2.5\n")
    assert texts(tail.read(clock.tick())) == ["step 9 loss 2.5"]


def test_a_partial_line_waits_for_its_newline(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    log.write_text("")
    tail = open_tail(tails, log, clock)
    append(log, "epoch 1 ")
    assert tail.read(clock.tick()).events == []
    append(log, "done\nepoch 2 ")
    assert texts(tail.read(clock.tick())) == ["epoch 1 done"]
    append(log, "cut")
    assert texts(tail.flush()) == ["epoch 2 cut"]


def test_rename_rotation_reads_the_old_file_to_its_end_first(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    log.write_text("")
    tail = open_tail(tails, log, clock)
    append(log, "a1\na2\n")
    assert texts(tail.read(clock.tick())) == ["a1", "a2"]
    append(log, "a3\na4 unfinished")
    log.rename(log.with_name("train.log.1"))
    log.write_text("b1\nb2\n")
    assert texts(tail.read(clock.tick())) == ["a3", "a4 unfinished", "b1", "b2"]
    append(log, "b3\n")
    assert texts(tail.read(clock.tick())) == ["b3"]


def test_copytruncate_starts_again_at_zero(tails: list[LogTail], log: Path, clock: Clock) -> None:
    log.write_text("")
    tail = open_tail(tails, log, clock)
    append(log, "a long line before the copy\nanother\n")
    assert len(texts(tail.read(clock.tick()))) == 2
    with log.open("r+") as f:
        f.truncate(0)
    append(log, "c1\nc2\n")
    assert texts(tail.read(clock.tick())) == ["c1", "c2"]


def test_a_missing_file_is_reported_once_then_read_when_it_appears(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    tail = open_tail(tails, log, clock)
    first = tail.read(clock.tick())
    (error,) = first.events
    assert error.kind == "log_source_error" and error.labels == {"path": str(log)}
    assert str(log) in error.text and error.data["level"] == "warning"
    assert tail.read(clock.tick()).events == []
    log.write_text("hello\n")
    assert texts(tail.read(clock.tick())) == ["hello"]


def test_a_deleted_file_is_reported_and_its_successor_followed(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    log.write_text("")
    tail = open_tail(tails, log, clock)
    append(log, "before\n")
    assert texts(tail.read(clock.tick())) == ["before"]
    log.unlink()
    gone = tail.read(clock.tick())
    assert [e.kind for e in gone.events] == ["log_source_error"]
    assert tail.read(clock.tick()).events == []
    log.write_text("after\n")
    assert texts(tail.read(clock.tick())) == ["after"]
    log.unlink()
    assert [e.kind for e in tail.read(clock.tick()).events] == ["log_source_error"]


def test_unreadable_file_is_reported_not_raised(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    log.mkdir()
    tail = open_tail(tails, log, clock)
    (error,) = tail.read(clock.tick()).events
    assert error.kind == "log_source_error"
    assert tail.read(clock.tick()).events == []


def test_one_read_takes_a_bounded_number_of_bytes(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    log.write_text("")
    tail = open_tail(tails, log, clock, max_bytes_per_read=64)
    lines = [f"line {i:04d}" for i in range(100)]  # 10 bytes each with the newline
    append(log, "".join(f"{line}\n" for line in lines))
    seen: list[str] = []
    for _ in range(100):
        got = texts(tail.read(clock.tick()))
        assert len(got) <= 7
        seen += got
    assert seen == lines


def test_a_traceback_in_the_file_is_one_event(
    tails: list[LogTail], log: Path, clock: Clock
) -> None:
    log.write_text("")
    tail = open_tail(tails, log, clock, quiet_s=5.0)
    append(log, "Traceback (most recent call last):\n")
    append(log, '  File "train.py", line 3, in <module>\n')
    assert tail.read(clock.tick()).events == []
    append(log, "    step()\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    assert tail.read(clock.tick()).events == []
    (event,) = tail.read(clock.tick(5.0)).events
    assert event.text.endswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert event.data["exception"] == "torch.OutOfMemoryError" and event.data["lines"] == 4


def test_flush_emits_a_traceback_cut_short(tails: list[LogTail], log: Path, clock: Clock) -> None:
    log.write_text("")
    tail = open_tail(tails, log, clock)
    append(log, 'Traceback (most recent call last):\n  File "train.py", line 3')
    (event,) = tail.flush().events
    assert event.data["incomplete"] is True and event.data["lines"] == 2
    assert event.ts == clock.now


def test_close_releases_the_file(tails: list[LogTail], log: Path, clock: Clock) -> None:
    log.write_text("x\n")
    tail = open_tail(tails, log, clock)
    fds = set(os.listdir("/proc/self/fd"))
    tail.close()
    assert len(set(os.listdir("/proc/self/fd")) - fds) == 0
    assert len(fds - set(os.listdir("/proc/self/fd"))) == 1
