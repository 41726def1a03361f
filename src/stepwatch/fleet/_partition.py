"""Reading one partition: hold its lock, read the stream from this collector's position, hand
each message to the collector, and acknowledge it only once the collector committed it.

The lock is an exclusive queue on the reading connection: the broker lets one connection hold
it and drops it the moment that connection dies, so a partition has one reader at a time and a
killed collector's partitions are free at once.
"""

from __future__ import annotations

import enum
import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions

from ..spool import Backoff
from ..wire import partition_stream
from ._offsets import OffsetBook

__all__ = ["Delivery", "Outcome", "PartitionReader"]

log = logging.getLogger("stepwatch.fleet")

#: Messages the broker sends ahead of the acknowledgements (a stream needs a bound).
PREFETCH = 64
#: Messages handed to the collector at once (of different sources), so that its group
#: commits take several partitions' and sources' batches together.
IN_FLIGHT = 16
#: The broker's answer when another connection holds a partition's lock.
RESOURCE_LOCKED = 405
#: How soon to try a held lock again: the takeover waits no longer than this.
LOCK_RETRY_S = 0.2


class Outcome(enum.Enum):
    """What became of one message: committed (or a duplicate), refused for good, or not now."""

    TAKEN = "taken"
    REFUSED = "refused"
    LATER = "retried"


#: Hands a message (path, body, content type, token) to the collector.
Delivery = Callable[[str, bytes, str, str | None], Outcome]


@dataclass(frozen=True, slots=True)
class Addressed:
    """What a message's headers say: the API path, the producer's token, and the source
    whose batch it is (None: a run's record, handed on after everything before it)."""

    path: str
    token: str | None
    source: str | None


def lock_name(partition: int) -> str:
    return f"{partition_stream(partition)}.reader"


class PartitionReader:
    """A thread that owns partition ``index`` for as long as it runs.

    Args:
        params: the broker's connection parameters.
        index: the partition.
        offsets: where each partition was left; moved after each committed message.
        deliver: hands a message to the collector; LATER is retried (with backoff) until it
            is TAKEN or REFUSED, or the reader is stopped.
        path_of: reads a message's headers (None: not stepwatch's).
    """

    def __init__(
        self,
        params: pika.URLParameters,
        index: int,
        offsets: OffsetBook,
        deliver: Delivery,
        path_of: Callable[[Any], Addressed | None],
    ) -> None:
        self.index, self._params, self._offsets = index, params, offsets
        self._deliver, self._path_of = deliver, path_of
        self._stop = threading.Event()
        self.reading = threading.Event()  # set while the lock is held and the stream is read
        self.counts: Counter[Outcome] = Counter()
        self._thread = threading.Thread(
            target=self._run, name=f"stepwatch-partition-{index}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the message in hand (its successors wait for the next reader)."""
        self._stop.set()

    def join(self, timeout_s: float | None = None) -> None:
        self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        backoff = Backoff(base_s=0.25, cap_s=5.0)
        while not self._stop.is_set():
            try:
                self._read()
                backoff.reset()
            except pika.exceptions.ChannelClosedByBroker as exc:
                if exc.reply_code != RESOURCE_LOCKED:
                    log.warning("partition %d: %s; trying again", self.index, exc)
                self._stop.wait(LOCK_RETRY_S)  # its reader is letting it go, or is gone
            except (pika.exceptions.AMQPError, OSError) as exc:
                log.debug("partition %d: %s; trying again", self.index, exc)
                self._stop.wait(backoff.next())

    def _read(self) -> None:
        """Take the lock (or fail at once: another reader holds it) and read until stopped."""
        conn = pika.BlockingConnection(self._params)
        try:
            channel = conn.channel()
            channel.queue_declare(lock_name(self.index), exclusive=True, auto_delete=True)
            channel.basic_qos(prefetch_count=PREFETCH)
            start = self._offsets.next(self.index)
            flight = Flight(channel)
            channel.basic_consume(
                partition_stream(self.index),
                lambda ch, method, props, body: self._on_message(flight, method, props, body),
                arguments={"x-stream-offset": "first" if start is None else start},
            )
            self.reading.set()
            log.info("reading partition %d from %s", self.index, start or "its first offset")
            with ThreadPoolExecutor(IN_FLIGHT, f"stepwatch-partition-{self.index}") as pool:
                self._pool = pool
                try:
                    while not self._stop.is_set():
                        conn.process_data_events(time_limit=0.05)
                        self._settle(flight, wait=False)
                finally:
                    while flight.offsets:  # what is in hand goes in (or waits for a later read)
                        self._settle(flight, wait=True)
        finally:
            self.reading.clear()
            if conn.is_open:
                conn.close()

    def _on_message(self, flight: Flight, method: Any, props: Any, body: bytes) -> None:
        """Hand a message on once nothing of its source (of anything, for a run's record) is
        in hand, so each source's batches are applied in their order."""
        headers = props.headers or {}
        offset = int(headers.get("x-stream-offset", -1))
        addressed = self._path_of(headers)
        source = addressed.source if addressed is not None else None
        while not self._stop.is_set() and not flight.may_take(source):
            self._settle(flight, wait=True)
        if self._stop.is_set():
            return  # not handed on: the next reader reads it from its own position
        flight.take(offset, method.delivery_tag, source)
        if addressed is None:
            log.warning("partition %d: a message without a stepwatch path, skipped", self.index)
            flight.done.put((offset, Outcome.REFUSED))
            return
        content_type = props.content_type or ""
        self._pool.submit(self._until_settled, flight, offset, addressed, body, content_type)

    def _settle(self, flight: Flight, wait: bool) -> None:
        """Acknowledge what the collector took or refused and move the read position to the
        last offset below which nothing is in hand."""
        try:
            offset, outcome = flight.done.get(timeout=0.2) if wait else flight.done.get_nowait()
        except queue.Empty:
            return
        while True:
            settled = flight.settle(offset, outcome is not Outcome.LATER)
            if outcome is not Outcome.LATER:
                self.counts[outcome] += 1
            if settled is not None:
                self._offsets.done(self.index, settled)
            try:
                offset, outcome = flight.done.get_nowait()
            except queue.Empty:
                return

    def _until_settled(
        self, flight: Flight, offset: int, to: Addressed, body: bytes, content_type: str
    ) -> None:
        """Deliver until taken or refused (LATER only when stopped), then say so."""
        backoff = Backoff(base_s=0.1, cap_s=5.0)
        while True:
            outcome = self._deliver(to.path, body, content_type, to.token)
            if outcome is not Outcome.LATER or self._stop.wait(backoff.next()):
                flight.done.put((offset, outcome))
                return
            self.counts[Outcome.LATER] += 1


class Flight:
    """The messages of one read in hand: their offsets and delivery tags, the sources they
    are of, and what came back, so that acknowledgements stay on the reading thread."""

    def __init__(self, channel: Any) -> None:
        self._channel = channel
        self.offsets: dict[int, tuple[int, str | None]] = {}  # offset: (tag, source)
        self._sources: set[str | None] = set()
        self.done: queue.SimpleQueue[tuple[int, Outcome]] = queue.SimpleQueue()
        self._highest = -1  # the highest offset handled
        self._unhandled: int | None = None  # the lowest offset left unhandled (stopped)

    def may_take(self, source: str | None) -> bool:
        """A message of no source (a run's record) waits for all and is waited for by all;
        others wait for their source."""
        if len(self.offsets) >= IN_FLIGHT or None in self._sources:
            return False
        return not self.offsets if source is None else source not in self._sources

    def take(self, offset: int, tag: int, source: str | None) -> None:
        self.offsets[offset] = (tag, source)
        self._sources.add(source)

    def settle(self, offset: int, handled: bool) -> int | None:
        """Acknowledge ``offset``; the offset below which everything is handled, if it moved."""
        tag, source = self.offsets.pop(offset)
        self._sources.discard(source)
        self._channel.basic_ack(tag)
        if handled:
            self._highest = max(self._highest, offset)
        elif self._unhandled is None or offset < self._unhandled:
            self._unhandled = offset
        limits = [self._highest]
        if self.offsets:
            limits.append(min(self.offsets) - 1)
        if self._unhandled is not None:
            limits.append(self._unhandled - 1)
        settled = min(limits)
        return settled if settled >= 0 else None
