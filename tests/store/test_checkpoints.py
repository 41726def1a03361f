"""Checkpoints in the store: the position they stand at, saved in one piece, and the data since
read back in the order the store took it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from stepwatch.model import NO_STEP, Event, RecordBatch, SeriesKey
from stepwatch.store import Checkpoint, Position, Retention, Store, _checkpoints

from .conftest import T0, batch

LOSS = SeriesKey.of("loss", {"run": "r1"})
TEMP = SeriesKey.of("gpu.temp_c", {"run": "r1", "node": "n0"})


def _log(text: str, ts: float = T0) -> Event:
    return Event(ts, "log", text, {"run": "r1"})


def test_every_commit_moves_the_position_and_it_outlives_a_reopen(store_path: Path) -> None:
    with Store(store_path) as store:
        assert store.position() == Position(0, 0)
        store.apply([batch([LOSS], [0, 0], [T0, T0 + 1], [1.0, 0.9], events=[_log("a")])])
        assert store.position() == Position(2, 1)
        store.apply([batch([TEMP], [0], [T0], [70.0], seq=2, events=[_log("b"), _log("c")])])
        store.apply([RecordBatch.of("stepwatch.collector", [Event(T0, "alert", "x")])])
        assert store.position() == Position(3, 3)  # the collector's records are no data
    with Store(store_path) as store:
        assert store.position() == Position(3, 3)


def test_batches_since_a_position_are_what_came_after_it_in_order(store_path: Path) -> None:
    with Store(store_path) as store:
        store.apply([batch([LOSS], [0], [T0], [1.0], step=[0], events=[_log("before")])])
        start = store.position()
        store.apply(
            [
                batch([LOSS, TEMP], [0, 1], [T0 + 1, T0], [0.9, 70.0], step=[1, NO_STEP], seq=2),
                batch([TEMP], [0], [T0 + 1], [71.0], source="agent", events=[_log("after")]),
            ]
        )
        end = store.position()
        store.apply([batch([LOSS], [0], [T0 + 2], [0.8], seq=3)])  # past ``end``: left out
        got = list(store.batches_since(start, end))
    samples, events = got
    assert [samples.keys[i] for i in samples.series] == [LOSS, TEMP, TEMP]
    assert samples.ts.tolist() == [T0 + 1, T0, T0 + 1]
    assert samples.step.tolist() == [1, NO_STEP, NO_STEP]
    assert samples.value.tolist() == [0.9, 70.0, 71.0]
    assert len(events) == 0 and [e.text for e in events.events] == ["after"]


def test_a_long_backlog_comes_back_in_bounded_chunks(store_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_checkpoints, "CHUNK_ROWS", 4)
    with Store(store_path) as store:
        n = 10
        store.apply([batch([LOSS], [0] * n, T0 + np.arange(n), np.arange(n, dtype=float))])
        chunks = list(store.batches_since(Position(1, 0)))
    assert [len(c) for c in chunks] == [4, 4, 1]
    assert np.concatenate([c.value for c in chunks]).tolist() == list(range(1, n))


def test_a_checkpoint_is_replaced_whole(store_path: Path) -> None:
    with Store(store_path) as store:
        assert store.load_checkpoint() is None
        store.save_checkpoint({"detection": b"one", "policy": b"two"}, Position(5, 2))
        store.save_checkpoint({"detection": b"three"}, Position(7, 3))
    with Store(store_path) as store:
        assert store.load_checkpoint() == Checkpoint({"detection": b"three"}, Position(7, 3))


def test_event_numbers_never_go_back_after_retention(store_path: Path, clock) -> None:
    with Store(store_path, clock=clock) as store:
        store.apply([batch([LOSS], [0], [T0], [1.0], events=[_log("old", T0 - 1e6)])])
        store.save_checkpoint({"detection": b"x"}, store.position())
        assert (
            store.retention.retain(Retention.parse("events=1d")).events == 1
        )  # the only event goes
    with Store(store_path, clock=clock) as store:
        assert store.position() == Position(1, 1)
