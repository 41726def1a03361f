"""The broker's side of the layout: N durable streams, one per partition.

Streams (not classic queues) because a stream keeps what was read: a collector that takes a
partition over reads it from its own position, so the run's whole history reaches the new
owner's store; the retention bounds what the broker keeps on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pika.exceptions

from ..wire import FLEET_EXCHANGE, partition_stream
from ._ledger import LEDGER_BYTES, LEDGER_STREAM

__all__ = ["DEFAULT_PARTITIONS", "BrokerLayout", "LayoutError", "declare"]

DEFAULT_PARTITIONS = 16


class LayoutError(ValueError):
    """The broker holds the streams with other settings than this collector's."""


@dataclass(frozen=True, slots=True)
class BrokerLayout:
    """Where batches wait: ``partitions`` streams, each kept up to ``retention_bytes`` and
    ``max_age`` (RabbitMQ's units: ``7D``, ``24h``). Every collector of a fleet must agree,
    and the partition count is set once: a run's partition is its id's hash modulo it."""

    url: str
    partitions: int = DEFAULT_PARTITIONS
    retention_bytes: int = 1 << 30
    max_age: str = "7D"

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ValueError("a broker layout needs at least one partition")


def declare(channel: Any, layout: BrokerLayout) -> None:
    """Declare (idempotently) the fleet's exchange and the streams, the first one last; on a
    channel of its own (a stream too many closes it)."""
    try:
        channel.queue_declare(partition_stream(layout.partitions), passive=True)
    except pika.exceptions.ChannelClosedByBroker:
        channel = channel.connection.channel()
    else:
        raise LayoutError(
            f"the broker holds more than {layout.partitions} partitions: every collector of a "
            "fleet takes the same --broker-partitions"
        )
    channel.exchange_declare(FLEET_EXCHANGE, "fanout", durable=True)
    ledger = {"x-queue-type": "stream", "x-max-length-bytes": LEDGER_BYTES}
    channel.queue_declare(LEDGER_STREAM, durable=True, arguments=ledger)
    arguments = {
        "x-queue-type": "stream",
        "x-max-length-bytes": layout.retention_bytes,
        "x-max-age": layout.max_age,
    }
    for index in reversed(range(layout.partitions)):
        try:
            channel.queue_declare(partition_stream(index), durable=True, arguments=arguments)
        except pika.exceptions.ChannelClosedByBroker as exc:
            raise LayoutError(
                f"partition {index} exists with other settings ({exc.reply_text}): every "
                "collector of a fleet takes the same --broker-partitions and retention"
            ) from None
