"""Queue workers: items handled in order on one named thread, a stop that drains or drops what
waits as the owner says, a failure logged while the next item comes, a bounded queue that says
no, and batches that share one call."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest
from conftest import poll

from stepwatch._worker import BatchWorker, QueueWorker

log = logging.getLogger("stepwatch.test")
WAIT_S = 30.0


class Gate:
    """A handler that records each item and the thread it ran on, and holds at the first
    item until released (so that others queue behind it)."""

    def __init__(self) -> None:
        self.items: list[object] = []
        self.threads: set[str] = set()
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, item: object) -> None:
        self.entered.set()
        assert self.release.wait(WAIT_S)
        self.threads.add(threading.current_thread().name)
        self.items.append(item)


def queue_worker(handle: Callable[[int], object], **options: object) -> QueueWorker[int]:
    return QueueWorker(
        handle, name="stepwatch-test", failed="a test item failed", log=log, **options
    )


def stop_while_held(worker: QueueWorker[int] | BatchWorker[int], gate: Gate) -> None:
    """Ask the stop while the first item is held, then let it go and wait for the thread."""
    worker.request_stop()
    gate.release.set()
    assert worker.join(WAIT_S)


def test_items_are_handled_in_order_and_a_draining_stop_handles_what_waits() -> None:
    gate = Gate()
    worker = queue_worker(gate)
    worker.start()
    worker.put(0)
    assert gate.entered.wait(WAIT_S)
    for i in range(1, 5):
        assert worker.put(i)
    stop_while_held(worker, gate)
    assert gate.items == [0, 1, 2, 3, 4]
    assert gate.threads == {"stepwatch-test"}
    assert not worker.alive


def test_a_dropping_stop_ends_the_item_under_way_and_skips_the_rest() -> None:
    gate, seen_stop = Gate(), []

    def handle(item: int) -> None:
        gate(item)
        seen_stop.append(worker.stop_event.is_set())

    worker = queue_worker(handle, drain=False)
    worker.start()
    worker.put(0)
    assert gate.entered.wait(WAIT_S)
    worker.put(1)
    stop_while_held(worker, gate)
    assert gate.items == [0] and seen_stop == [True]


def test_an_item_that_fails_is_logged_once_and_the_next_is_handled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[int] = []

    def handle(item: int) -> None:
        if item == 1:
            raise RuntimeError("bad item")
        done.append(item)

    worker = queue_worker(handle)
    worker.start()
    for i in range(3):
        worker.put(i)
    worker.stop()
    assert done == [0, 2]
    failures = [r for r in caplog.records if r.getMessage() == "a test item failed"]
    assert len(failures) == 1 and failures[0].exc_info is not None


def test_a_full_queue_takes_nothing_more() -> None:
    gate = Gate()
    worker = queue_worker(gate, maxsize=2)
    worker.start()
    worker.put(0)
    assert gate.entered.wait(WAIT_S)  # taken: the queue is empty again
    assert worker.put(1) and worker.put(2)
    assert not worker.put(3)
    gate.release.set()
    worker.stop()
    assert gate.items == [0, 1, 2]


def test_idle_runs_when_nothing_comes_and_last_runs_after_the_queue() -> None:
    calls: list[object] = []
    worker = queue_worker(
        calls.append,
        idle_s=0.01,
        idle=lambda: calls.append("idle"),
        last=lambda: calls.append("last"),
    )
    worker.start()
    assert poll(lambda: "idle" in calls)
    worker.put(7)
    worker.stop()
    assert calls[-2:] == [7, "last"]


def test_it_starts_again_after_a_stop() -> None:
    done: list[int] = []
    worker = queue_worker(done.append)
    for i in range(2):
        worker.start()
        worker.put(i)
        worker.stop()
    assert done == [0, 1]


def test_a_stop_cuts_a_pause_short() -> None:
    entered, woke = threading.Event(), []

    def handle(item: int) -> None:
        entered.set()
        woke.append(worker.pause(WAIT_S * 10))

    worker = queue_worker(handle)
    worker.start()
    worker.put(0)
    assert entered.wait(WAIT_S)
    worker.request_stop()
    assert worker.join(WAIT_S)
    assert woke == [True]


def test_batches_take_what_waits_up_to_their_weight_and_drain_at_the_stop() -> None:
    gate = Gate()
    worker: BatchWorker[int] = BatchWorker(
        gate,
        weigh=lambda item: item,
        max_weight=5,
        name="stepwatch-test-batch",
        failed="a test batch failed",
        log=log,
        last=lambda: gate.items.append("last"),
    )
    worker.start()
    worker.put(1)
    assert gate.entered.wait(WAIT_S)
    for item in (2, 2, 1, 4, 3):
        worker.put(item)
    stop_while_held(worker, gate)
    assert gate.items == [[1], [2, 2, 1], [4, 3], "last"]
