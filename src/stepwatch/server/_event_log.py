"""Records the collector writes itself (alert transitions, silences, acks, audit): batches of
the ``RecordBatch`` type, so they take the store's one write path, in order, into the records
table, where nothing ingested can reach."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

from ..act import AUDIT_EVENT
from ..model import RESERVED_SOURCE_PREFIX, Event, RecordBatch
from ..store import Store
from ._writer import GroupWriter, WriterClosed

__all__ = ["COLLECTOR_SOURCE", "EventLog"]

#: The source name of the collector's own batches (no producer may claim it).
COLLECTOR_SOURCE = f"{RESERVED_SOURCE_PREFIX}collector"
#: The most audit records a restored part reads back (those since its checkpoint).
MAX_AUDITS_SINCE = 100_000


class EventLog:
    """Appends records through the group writer; once it has stopped, straight to the store."""

    def __init__(self, store: Store, writer: GroupWriter, source: str = COLLECTOR_SOURCE) -> None:
        self._store, self._writer, self.source = store, writer, source
        self._lock = threading.Lock()

    def append(self, events: Sequence[Event]) -> Future[bool]:
        """Queue ``events`` for the next commit; the future resolves once they are stored."""
        with self._lock:
            batch = RecordBatch.of(self.source, list(events))
            try:
                return self._writer.submit(batch)
            except WriterClosed:
                self._writer.stop()  # let what it still holds land first: records stay in order
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

    def audits_since(self, ts: float) -> list[Event]:
        """The audit records stored since ``ts``: what the act layer did after its checkpoint."""
        return self._store.records(kind=AUDIT_EVENT, start=ts, limit=MAX_AUDITS_SINCE)
