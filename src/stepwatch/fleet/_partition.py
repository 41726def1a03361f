"""Reading one partition: hold its lock, read the stream from this collector's position, hand
each message to the collector, and acknowledge it only once the collector committed it.

The lock is an exclusive queue on the reading connection: the broker lets one connection hold
it and drops it the moment that connection dies, so a partition has one reader at a time and a
killed collector's partitions are free at once.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections import Counter
from collections.abc import Callable
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
        path_of: reads a message's API path and token from its headers (None: not ours).
    """

    def __init__(
        self,
        params: pika.URLParameters,
        index: int,
        offsets: OffsetBook,
        deliver: Delivery,
        path_of: Callable[[Any], tuple[str, str | None] | None],
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
            channel.basic_consume(
                partition_stream(self.index),
                self._on_message,
                arguments={"x-stream-offset": "first" if start is None else start},
            )
            self.reading.set()
            log.info("reading partition %d from %s", self.index, start or "its first offset")
            while not self._stop.is_set():
                conn.process_data_events(time_limit=0.2)
        finally:
            self.reading.clear()
            if conn.is_open:
                conn.close()

    def _on_message(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        offset = int((props.headers or {}).get("x-stream-offset", -1))
        if self._stop.is_set():
            return  # not acknowledged: the next reader reads it from its own position
        addressed = self._path_of(props.headers or {})
        outcome = Outcome.REFUSED
        if addressed is not None:
            path, token = addressed
            outcome = self._until_settled(path, body, props.content_type or "", token)
            if outcome is Outcome.LATER:
                return  # stopped while the collector could not take it
        else:
            log.warning("partition %d: a message without a stepwatch path, skipped", self.index)
        self.counts[outcome] += 1
        channel.basic_ack(method.delivery_tag)
        if offset >= 0:
            self._offsets.done(self.index, offset)

    def _until_settled(
        self, path: str, body: bytes, content_type: str, token: str | None
    ) -> Outcome:
        backoff = Backoff(base_s=0.1, cap_s=5.0)
        while True:
            outcome = self._deliver(path, body, content_type, token)
            if outcome is not Outcome.LATER or self._stop.wait(backoff.next()):
                return outcome
            self.counts[Outcome.LATER] += 1
