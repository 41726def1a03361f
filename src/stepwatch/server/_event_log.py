"""Events the collector writes itself (alert transitions, silences, acks): batches without
samples from one source of our own, so they take the store's one write path, in order."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np

from ..model import Event, SampleBatch
from ..store import Store
from ._writer import GroupWriter, WriterClosed

__all__ = ["COLLECTOR_SOURCE", "EventLog"]

#: The source name of the collector's own batches.
COLLECTOR_SOURCE = "stepwatch.collector"


class EventLog:
    """Appends events through the group writer; once it has stopped, straight to the store."""

    def __init__(self, store: Store, writer: GroupWriter, source: str = COLLECTOR_SOURCE) -> None:
        self._store, self._writer, self.source = store, writer, source
        self._lock = threading.Lock()
        self._seq = store.last_seq(source) or 0

    def append(self, events: Sequence[Event]) -> Future[bool]:
        """Queue ``events`` for the next commit; the future resolves once they are stored."""
        with self._lock:
            self._seq += 1
            batch = SampleBatch(
                self.source,
                self._seq,
                [],
                np.empty(0, np.uint32),
                np.empty(0, np.float64),
                np.empty(0, np.int64),
                np.empty(0, np.float64),
                list(events),
            )
            try:
                return self._writer.submit(batch)
            except WriterClosed:
                self._writer.stop()  # let what it still holds land first: seqs stay in order
                done: Future[bool] = Future()
                done.set_result(self._store.apply([batch])[0])
                return done

    def record(self, events: Sequence[Event]) -> None:
        """``append`` without waiting (the live detector's recorder)."""
        if events:
            self.append(events)

    def write(self, events: Sequence[Event], timeout: float = 30.0) -> None:
        """``append`` and wait until stored (an API call answers only after that)."""
        self.append(events).result(timeout)
