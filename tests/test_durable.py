"""The checkpoint worker: every part in one checkpoint with the position it stands at, taken
now and then and once more at stop; a part that fails keeps the last good checkpoint whole."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import poll

from stepwatch._durable import CheckpointWorker, restore_parts
from stepwatch.store import Checkpoint, Position, Store


class Counter:
    """A part whose state is one number (the form matters not to the worker)."""

    def __init__(self, name: str) -> None:
        self.name, self.value, self.broken = name, 0, False

    def snapshot(self) -> bytes:
        if self.broken:
            raise RuntimeError("cannot take a snapshot now")
        return str(self.value).encode()

    def restore(self, state: bytes) -> None:
        if not state.isdigit():
            raise ValueError(f"not a counter: {state!r}")
        self.value = int(state)


def test_parts_are_saved_together_now_and_then_and_at_stop(tmp_path: Path) -> None:
    a, b = Counter("a"), Counter("b")
    where = [Position(1, 1)]
    with Store(tmp_path / "s.duckdb") as store:
        worker = CheckpointWorker(store, [a, b], position=lambda: where[-1], interval_s=0.05)
        worker.start()
        assert poll(lambda: worker.saved >= 2)
        a.value, b.value = 3, 4
        where.append(Position(7, 2))
        worker.stop()
        saved = store.load_checkpoint()
    assert saved == Checkpoint({"a": b"3", "b": b"4"}, Position(7, 2))


def test_a_part_that_fails_keeps_the_last_checkpoint_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = Counter("a"), Counter("b")
    with Store(tmp_path / "s.duckdb") as store:
        worker = CheckpointWorker(store, [a, b], position=Position)
        worker.checkpoint()
        a.value, b.broken = 5, True
        worker.start()
        with caplog.at_level(logging.ERROR, "stepwatch.durable"):
            worker.stop()
        saved = store.load_checkpoint()
    assert saved == Checkpoint({"a": b"0", "b": b"0"}, Position())
    assert "checkpoint failed; the previous one stays" in caplog.text


def test_parts_restore_what_they_can_and_the_others_start_empty(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good, bad, new = Counter("good"), Counter("bad"), Counter("new")
    saved = Checkpoint({"good": b"9", "bad": b"{junk"}, Position())
    with caplog.at_level(logging.INFO, "stepwatch.durable"):
        assert restore_parts([good, bad, new], saved) == {"good"}
    assert (good.value, bad.value, new.value) == (9, 0, 0)
    assert "the checkpoint of bad is not readable, it starts empty: not a counter" in caplog.text
    assert "no checkpoint of new: it starts empty" in caplog.text
    assert restore_parts([Counter("good")], None) == set()


def test_an_interval_of_nothing_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store, pytest.raises(ValueError, match="above 0 s"):
        CheckpointWorker(store, [], position=Position, interval_s=0)
