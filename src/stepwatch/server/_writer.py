"""Group commit: one thread owns every store write and applies all waiting batches in one call.

Why: a DuckDB transaction costs about the same for one batch as for fifty, so
concurrent senders share commits instead of queueing behind each other's.
Each request waits on its own future, resolved only after the commit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from .._worker import BatchWorker
from ..model import SampleBatch

__all__ = ["BatchSink", "CommitHook", "GroupWriter", "TimingHook", "WriterClosed", "WriterFull"]

log = logging.getLogger("stepwatch.server")


class BatchSink(Protocol):
    """What the writer needs of the store."""

    def apply(self, batches: Sequence[SampleBatch]) -> list[bool]: ...

    def compact(self) -> None: ...


#: Told in the writer thread of the batches one commit applied (not duplicates); keep it cheap.
CommitHook = Callable[[Sequence[SampleBatch]], None]
#: Told in the writer thread how long one group commit took, in seconds.
TimingHook = Callable[[float], None]


class WriterClosed(RuntimeError):
    """The collector is shutting down and takes no more batches; try again in ``retry_after_s``."""

    retry_after_s = 5


class WriterFull(WriterClosed):
    """The queue holds as much as it may: the sender keeps the batch and sends it again soon."""

    retry_after_s = 1


def _rows(batch: SampleBatch) -> int:
    """What a batch weighs in the queue: its samples and events."""
    return len(batch) + len(batch.events)


@dataclass(slots=True)
class _Item:
    batch: SampleBatch
    future: Future[bool]


class GroupWriter:
    """Drains a queue of decoded batches into ``store.apply``; compacts the store now and then."""

    def __init__(
        self,
        store: BatchSink,
        *,
        compact_interval_s: float = 2.0,
        compact_rows: int = 5_000_000,
        max_group_rows: int = 1_000_000,
        max_queued_rows: int = 4_000_000,
        max_queued_batches: int = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._interval = compact_interval_s
        self._compact_rows = compact_rows
        self._max_queued = (max_queued_rows, max_queued_batches)
        self._queued = [0, 0]  # rows and batches submitted, not yet taken by the thread
        self._monotonic = monotonic
        self._worker: BatchWorker[_Item] = BatchWorker(
            self._commit,
            weigh=lambda item: 0 if item.future.cancelled() else len(item.batch),
            max_weight=max_group_rows,
            name="stepwatch-writer",
            failed="the store writer failed on a group commit; carrying on",
            log=log,
            idle_s=compact_interval_s,
            idle=lambda: self._maybe_compact(force=False),
            last=lambda: self._maybe_compact(force=True),  # once what was queued is applied
        )
        self._lock = threading.Lock()
        self._closed = True
        self._rows_since_compact = 0
        self._last_compact = monotonic()
        #: Told of every commit, in order; a hook that raises is logged and the others still run.
        self.on_commit: list[CommitHook] = []
        #: Told of the duration of every group commit that succeeded (the collector's metrics).
        self.on_commit_seconds: list[TimingHook] = []

    def start(self) -> None:
        """Start accepting batches; may start again after ``stop`` (one app, many lifespans)."""
        with self._lock:
            if not self._closed:
                raise RuntimeError("writer already running")
            self._closed = False
            self._last_compact = self._monotonic()
            self._worker.start()

    @property
    def queued(self) -> tuple[int, int]:
        """Rows and batches submitted and not yet taken into a commit."""
        with self._lock:
            return self._queued[0], self._queued[1]

    @property
    def alive(self) -> bool:
        """True while batches are being accepted and the thread runs."""
        return self._worker.alive and not self._closed

    def submit(self, batch: SampleBatch) -> Future[bool]:
        """Queue a batch; the future gives True (applied) or False (duplicate) after the commit.

        A full queue raises ``WriterFull`` rather than hold the batch in memory: ingest faster
        than the store commits must slow the senders down, not grow the collector without end.
        One batch is always taken into an empty queue, however large.
        """
        future: Future[bool] = Future()
        rows = _rows(batch)
        with self._lock:
            if self._closed:
                raise WriterClosed(
                    "the collector is not accepting batches (shutting down); retry later"
                )
            queued_rows, queued_batches = self._queued
            max_rows, max_batches = self._max_queued
            if queued_batches and (queued_rows + rows > max_rows or queued_batches >= max_batches):
                raise WriterFull(
                    f"the collector's write queue is full ({queued_batches} batches, "
                    f"{queued_rows} rows waiting for the store); retry later"
                )
            self._queued = [queued_rows + rows, queued_batches + 1]
            self._worker.put(_Item(batch, future))
        return future

    def _taken(self, item: _Item) -> None:
        with self._lock:
            self._queued = [self._queued[0] - _rows(item.batch), self._queued[1] - 1]

    def stop(self) -> None:
        """Apply everything already queued, compact, and end the thread."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._worker.request_stop()  # behind the last batch queued
        self._worker.join()

    def _commit(self, taken: list[_Item]) -> None:
        """Apply the batches taken together (a cancelled request was never acked)."""
        for item in taken:
            self._taken(item)
        group = [item for item in taken if item.future.set_running_or_notify_cancel()]
        if group:
            self._apply(group)
        self._maybe_compact(force=False)

    def _apply(self, group: list[_Item]) -> None:
        """One transaction per group; if it fails, retry one by one so only the culprit fails."""
        started = self._monotonic()
        try:
            results = self._store.apply([item.batch for item in group])
        except Exception as exc:
            if len(group) == 1:
                group[0].future.set_exception(exc)
                return
            for item in group:
                self._apply([item])
            return
        self._tell(self.on_commit_seconds, self._monotonic() - started)
        # detection first: a sender that hears its batch is in may finish its run at once
        self._notify([item.batch for item, applied in zip(group, results, strict=True) if applied])
        for item, applied in zip(group, results, strict=True):
            item.future.set_result(applied)
            self._rows_since_compact += len(item.batch) if applied else 0

    def _notify(self, committed: list[SampleBatch]) -> None:
        if committed:
            self._tell(self.on_commit, committed)

    @staticmethod
    def _tell(hooks: Sequence[Callable[[Any], None]], news: Any) -> None:
        """Each hook in turn; one that raises is logged and the others still run."""
        for hook in hooks:
            try:
                hook(news)
            except Exception:
                log.exception("commit hook %r failed", hook)

    def _maybe_compact(self, *, force: bool) -> None:
        now = self._monotonic()
        rows = self._rows_since_compact
        due = rows >= self._compact_rows or (
            rows > 0 and now - self._last_compact >= self._interval
        )
        if not (due or force):
            return
        try:
            self._store.compact()
        except Exception:
            log.exception("store compaction failed; will retry")
        self._rows_since_compact = 0
        self._last_compact = now
