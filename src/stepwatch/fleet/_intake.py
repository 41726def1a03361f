"""The collector's broker intake: announce this collector, learn the others, read the partitions
this collector owns among the live ones, and give the others back the ones it no longer owns.

Ownership is computed, not negotiated (rendezvous hashing over the members heard lately), and
enforced by the broker (a partition's reader holds its lock queue): a fleet that disagrees for
a heartbeat or two has a partition wait, never read twice at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pika
import pika.exceptions

from .._redact import redact_url
from ..spool import Backoff
from ..wire import FLEET_EXCHANGE, HEADER_PATH, HEADER_SOURCE, HEADER_TOKEN, partition_of
from ._assign import owned_by, owner
from ._layout import BrokerLayout, LayoutError, declare
from ._ledger import LEDGER_STREAM, Ledger
from ._members import BEAT_S, Member, Members
from ._offsets import OffsetBook
from ._partition import Addressed, Delivery, Outcome, PartitionReader

__all__ = ["BrokerIntake", "addressed"]

log = logging.getLogger("stepwatch.fleet")


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value if isinstance(value, str) else None


def addressed(headers: dict[str, Any]) -> Addressed | None:
    """A message's API path, token and source; None for a message stepwatch did not publish."""
    path = _text(headers.get(HEADER_PATH))
    if path is None or not path.startswith("/api/v1/"):
        return None
    return Addressed(path, _text(headers.get(HEADER_TOKEN)), _text(headers.get(HEADER_SOURCE)))


class BrokerIntake:
    """Reads this collector's share of the broker's partitions into it.

    Args:
        layout: the broker and its partitions.
        member: this collector's id and the URL its API answers on.
        offsets: the file the read positions are kept in (beside the store).
        deliver: hands a message to this collector.
        ledger: the records collectors tell each other (None: none, without a fleet key).
        listen_s: how long to hear the fleet before claiming partitions, so a collector that
            joins does not reach for the others' partitions first.
    """

    def __init__(
        self,
        layout: BrokerLayout,
        member: Member,
        offsets: Path,
        deliver: Delivery,
        *,
        ledger: Ledger | None = None,
        listen_s: float = 2 * BEAT_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.layout = layout
        self._params = pika.URLParameters(layout.url)
        self._params.heartbeat = 30
        self.members = Members(member, monotonic)
        self.offsets = OffsetBook(offsets)
        self._deliver, self._listen_s, self._monotonic = deliver, listen_s, monotonic
        self.ledger = ledger
        self._readers: dict[int, PartitionReader] = {}
        self._retired: list[PartitionReader] = []  # stopping: their message in hand goes in
        self._settled: Counter[Outcome] = Counter()  # what readers now gone counted
        self._stop = threading.Event()
        self._started_at = monotonic()
        self._thread = threading.Thread(target=self._run, name="stepwatch-fleet", daemon=True)

    def start(self) -> BrokerIntake:
        """Declare the layout and begin. A broker whose layout differs is an error now; one
        that cannot be reached is tried again in the background (HTTP ingest goes on)."""
        try:
            self._declare()
        except (pika.exceptions.AMQPError, OSError) as exc:
            log.warning("the broker at %s: %s; trying again", redact_url(self.layout.url), exc)
        self._started_at = self._monotonic()
        self._thread.start()
        return self

    def _declare(self) -> None:
        conn = pika.BlockingConnection(self._params)
        try:
            declare(conn.channel(), self.layout)
        finally:
            if conn.is_open:
                conn.close()

    def stop(self) -> None:
        """Give every partition back (after the message in hand) and save the positions."""
        self._stop.set()
        self._thread.join()
        readers = list(self._readers.values()) + self._retired
        for reader in readers:
            reader.stop()
        for reader in readers:
            reader.join()
        self._readers.clear()
        self.offsets.save()

    def reading(self) -> tuple[int, ...]:
        """The partitions this collector reads now (their locks held)."""
        return tuple(sorted(p for p, r in self._readers.items() if r.reading.is_set()))

    def counts(self) -> dict[Outcome, int]:
        """Messages taken, refused and retried since the start, over every partition read."""
        total = Counter(self._settled)
        for reader in list(self._readers.values()) + list(self._retired):
            total.update(reader.counts)
        return {outcome: total[outcome] for outcome in Outcome}

    def owner_of(self, run: str) -> Member | None:
        """The member that reads ``run``'s partition now (None: none is heard to)."""
        partition = partition_of(run, self.layout.partitions)
        for member in self.members.alive().values():
            if partition in member.partitions:
                return member
        return None

    def _run(self) -> None:
        backoff = Backoff(base_s=0.25, cap_s=5.0)
        while not self._stop.is_set():
            try:
                self._announce()
                backoff.reset()
            except (pika.exceptions.AMQPError, OSError, LayoutError) as exc:
                log.warning("the broker at %s: %s; trying again", redact_url(self.layout.url), exc)
                self._stop.wait(backoff.next())

    def _announce(self) -> None:
        """Beat, listen, and rebalance every half second, on a connection of its own."""
        self._declare()  # again: the broker may have restarted without its data
        conn = pika.BlockingConnection(self._params)
        try:
            channel = conn.channel()
            inbox = channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
            channel.queue_bind(inbox, FLEET_EXCHANGE)
            channel.basic_consume(inbox, self._heard, auto_ack=True)
            told = self._open_ledger(conn)
            while not self._stop.is_set():
                me = Member(self.members.me.id, self.members.me.url, self.reading())
                self.members.me = me
                channel.basic_publish(FLEET_EXCHANGE, "", me.encode())
                if self.ledger is not None:
                    self.ledger.publish(told)
                self._rebalance()
                conn.process_data_events(time_limit=BEAT_S)
        finally:
            if conn.is_open:
                conn.close()

    def _open_ledger(self, conn: Any) -> Any:
        """Read the ledger from its start (again on each connection: applying is idempotent);
        the channel records are published on, with the broker's confirmation."""
        if self.ledger is None:
            return None
        reading = conn.channel()
        reading.basic_qos(prefetch_count=256)
        reading.basic_consume(
            LEDGER_STREAM, self.ledger.read, arguments={"x-stream-offset": "first"}
        )
        told = conn.channel()
        told.confirm_delivery()
        return told

    def _heard(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        try:
            member = Member.decode(body)
        except ValueError as exc:
            log.warning("the fleet exchange carried %s", exc)
            return
        if member.id != self.members.me.id:
            self.members.heard(member)

    def _rebalance(self) -> None:
        """Start readers for the partitions this collector owns, stop the others'."""
        if self._monotonic() - self._started_at < self._listen_s:
            return
        mine = owned_by(self.members.me.id, self.layout.partitions, self.members.alive())
        for partition in sorted(set(self._readers) - mine):
            reader = self._readers.pop(partition)
            reader.stop()
            self._retired.append(reader)
            log.info("partition %d goes to %s", partition, owner(partition, self.members.alive()))
        for partition in sorted(mine - set(self._readers)):
            reader = PartitionReader(
                self._params, partition, self.offsets, self._deliver, addressed
            )
            self._readers[partition] = reader
            reader.start()
        for reader in [r for r in self._retired if not r.alive]:
            self._retired.remove(reader)
            self._settled.update(reader.counts)
