"""GroupWriter: batches waiting together share one store.apply; a failing batch fails alone."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import pytest

from stepwatch.model import SampleBatch, SeriesKey
from stepwatch.server._writer import GroupWriter, WriterClosed, WriterFull


def batch(source: str, seq: int, n: int = 3) -> SampleBatch:
    return SampleBatch(
        source,
        seq,
        [SeriesKey.of("train.loss", {"run": "r"})],
        np.zeros(n, np.uint32),
        np.arange(n, dtype=np.float64),
        np.arange(n, dtype=np.int64),
        np.ones(n),
    )


class RecordingStore:
    """Applies nothing; records each apply call, can hold the first one, can refuse a source."""

    def __init__(self, refuse: str | None = None) -> None:
        self.calls: list[list[tuple[str, int]]] = []
        self.compactions = 0
        self.first_call = threading.Event()
        self.release = threading.Event()
        self.refuse = refuse
        self.seen: dict[str, int] = {}

    def apply(self, batches: Sequence[SampleBatch]) -> list[bool]:
        self.calls.append([(b.source, b.seq) for b in batches])
        self.first_call.set()
        self.release.wait()
        if any(b.source == self.refuse for b in batches):
            raise RuntimeError(f"refused {self.refuse}")
        out = []
        for b in batches:
            out.append(b.seq > self.seen.get(b.source, -1))
            self.seen[b.source] = max(b.seq, self.seen.get(b.source, -1))
        return out

    def compact(self) -> None:
        self.compactions += 1


def test_waiting_batches_share_one_apply_call() -> None:
    store = RecordingStore()
    writer = GroupWriter(store)
    writer.start()
    first = writer.submit(batch("a", 1))
    store.first_call.wait()
    waiting = [writer.submit(batch("b", i)) for i in range(5)] + [writer.submit(batch("a", 1))]
    store.release.set()
    assert first.result(timeout=10) is True
    assert [f.result(timeout=10) for f in waiting] == [True] * 5 + [False]
    writer.stop()
    assert store.calls == [[("a", 1)], [("b", i) for i in range(5)] + [("a", 1)]]


def test_a_failing_batch_fails_alone() -> None:
    store = RecordingStore(refuse="bad")
    store.release.set()
    writer = GroupWriter(store)
    store.release.clear()
    writer.start()
    hold = writer.submit(batch("a", 1))
    store.first_call.wait()
    futures = [writer.submit(batch(s, 1)) for s in ("b", "bad", "c")]
    store.release.set()
    hold.result(timeout=10)
    assert futures[0].result(timeout=10) is True
    with pytest.raises(RuntimeError, match="refused bad"):
        futures[1].result(timeout=10)
    assert futures[2].result(timeout=10) is True
    writer.stop()


def test_stop_drains_the_queue_compacts_and_refuses_more() -> None:
    store = RecordingStore()
    writer = GroupWriter(store, compact_interval_s=3600)
    writer.start()
    hold = writer.submit(batch("a", 1))
    store.first_call.wait()
    queued = [writer.submit(batch("a", i)) for i in range(2, 6)]
    stopper = threading.Thread(target=writer.stop)
    stopper.start()
    store.release.set()
    stopper.join()
    assert hold.result() and all(f.result() for f in queued)
    assert store.compactions == 1
    assert not writer.alive
    with pytest.raises(WriterClosed):
        writer.submit(batch("a", 9))


def test_compacts_after_enough_rows() -> None:
    store = RecordingStore()
    store.release.set()
    writer = GroupWriter(store, compact_rows=5, compact_interval_s=3600)
    writer.start()
    writer.submit(batch("a", 1, n=10)).result(timeout=10)
    writer.stop()
    assert store.compactions == 2  # one for the rows, one on stop


def test_a_cancelled_request_is_not_applied() -> None:
    store = RecordingStore()
    writer = GroupWriter(store)
    writer.start()
    hold = writer.submit(batch("a", 1))
    store.first_call.wait()
    cancelled: Future[bool] = writer.submit(batch("a", 2))
    assert cancelled.cancel()
    store.release.set()
    hold.result(timeout=10)
    writer.stop()
    assert store.calls == [[("a", 1)]]


def test_restarts_after_stop() -> None:
    store = RecordingStore()
    store.release.set()
    writer = GroupWriter(store)
    for seq in (1, 2):
        writer.start()
        assert writer.alive
        assert writer.submit(batch("a", seq)).result(timeout=10) is True
        writer.stop()


def test_a_full_queue_refuses_the_batch_until_the_store_catches_up() -> None:
    store = RecordingStore()
    writer = GroupWriter(store, max_queued_rows=5)
    writer.start()
    held = writer.submit(batch("a", 1))  # taken by the thread, held in apply
    store.first_call.wait()
    waiting = writer.submit(batch("a", 2))  # an empty queue takes one batch, however large
    with pytest.raises(WriterFull, match="queue is full") as refused:
        writer.submit(batch("a", 3))
    assert refused.value.retry_after_s >= 1
    store.release.set()
    assert held.result(timeout=10) and waiting.result(timeout=10)
    assert writer.submit(batch("a", 3)).result(timeout=10) is True  # room again
    writer.stop()
    assert ("a", 3) in store.calls[-1] and sum(c.count(("a", 3)) for c in store.calls) == 1


def test_the_queue_is_bounded_by_batches_too() -> None:
    store = RecordingStore()
    writer = GroupWriter(store, max_queued_batches=2)
    writer.start()
    writer.submit(batch("a", 1))
    store.first_call.wait()
    queued = [writer.submit(batch("b", i, n=0)) for i in range(2)]
    with pytest.raises(WriterFull):
        writer.submit(batch("b", 9, n=0))
    store.release.set()
    assert [f.result(timeout=10) for f in queued] == [True, True]
    writer.stop()


def test_queue_depth_and_commit_durations_are_told() -> None:
    """What the collector's metrics read: rows and batches waiting, and how long each group
    commit took (on the writer's clock), a failed commit not among them."""
    store = RecordingStore(refuse="bad")
    ticks = iter(range(0, 1000, 2))  # each reading of the clock: 2 s later
    writer = GroupWriter(store, compact_interval_s=3600, monotonic=lambda: next(ticks))
    durations: list[float] = []
    writer.on_commit_seconds.append(durations.append)
    writer.on_commit_seconds.insert(0, lambda s: 1 / 0)  # a broken hook: the others still run
    writer.start()
    held = writer.submit(batch("a", 1, n=4))
    store.first_call.wait()
    assert writer.queued == (0, 0)  # taken into the commit held in apply
    waiting = [writer.submit(batch("b", 1, n=3)), writer.submit(batch("c", 1, n=5))]
    assert writer.queued == (8, 2)
    store.release.set()
    assert held.result(timeout=10) and all(f.result(timeout=10) for f in waiting)
    with pytest.raises(RuntimeError):
        writer.submit(batch("bad", 1)).result(timeout=10)
    writer.stop()
    assert writer.queued == (0, 0)
    assert durations == [2, 2]  # two commits that succeeded, one clock step each


def test_detection_is_told_of_a_commit_before_its_sender_is() -> None:
    """A producer finishes its run once its last batch is acknowledged: detection must have
    that batch by then, or it takes it, after the finish, for the start of a run it then
    holds state of until the run counts as idle."""
    store = RecordingStore()
    writer = GroupWriter(store)
    acked_when_told: list[bool] = []
    sent: list[Future[bool]] = []
    writer.on_commit.append(lambda batches: acked_when_told.append(sent[0].done()))
    writer.start()
    sent.append(writer.submit(batch("a", 1)))
    store.release.set()
    assert sent[0].result(timeout=10) is True
    writer.stop()
    assert acked_when_told == [False]
