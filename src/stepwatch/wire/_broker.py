"""How batches travel through a RabbitMQ broker: the names both sides use and a message's key.

A message is the HTTP request a producer would have sent (the body as it is, its path, content
type and token in headers), so a collector passes it through the very checks HTTP ingest does.
A run's messages (its batches, its record, its end) all go to the partition its id hashes to,
a stream that one collector reads at a time, so they stay in order. Collectors declare the
streams from the last to the first: a producer that finds the first finds them all, and counts
them by looking for the next until one is missing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ._binary import CONTENT_TYPE as BINARY_CONTENT_TYPE
from ._binary import decode

__all__ = [
    "BROKER_SCHEMES",
    "FLEET_EXCHANGE",
    "HEADER_PATH",
    "HEADER_SOURCE",
    "HEADER_TOKEN",
    "RUNS_PATH",
    "STREAM_PREFIX",
    "Route",
    "is_broker_url",
    "partition_of",
    "partition_stream",
    "routing_key",
]

#: Partition ``i`` is the stream ``stepwatch.batches.<i>``.
STREAM_PREFIX = "stepwatch.batches."
#: The fanout exchange collectors announce themselves on.
FLEET_EXCHANGE = "stepwatch.fleet"
#: Message headers: the API path the body is for, and the producer's token.
HEADER_PATH = "stepwatch-path"
HEADER_TOKEN = "stepwatch-token"
#: A batch's source: a collector hands on batches of different sources at once, one source's
#: in order (a message without one, a run's record, after everything before it).
HEADER_SOURCE = "stepwatch-source"
RUNS_PATH = "/api/v1/runs"
BROKER_SCHEMES = ("amqp", "amqps")


def is_broker_url(url: str) -> bool:
    """Whether ``url`` names a broker (``amqp://`` or ``amqps://``) rather than a collector."""
    return urlsplit(url).scheme in BROKER_SCHEMES


def partition_stream(index: int) -> str:
    """The stream that holds partition ``index``."""
    return f"{STREAM_PREFIX}{index}"


def partition_of(key: str, partitions: int) -> int:
    """The partition of a run (a message's routing key), the same for every process."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


@dataclass(frozen=True, slots=True)
class Route:
    """Where a message goes: its run (which picks its partition), the samples it holds, and the
    source of its batch (None for a run's record or end)."""

    key: str
    samples: int = 0
    source: str | None = None


def routing_key(path: str, body: bytes, content_type: str) -> Route:
    """The run a message belongs to: a run record's id, the run in a finish's path, a batch's
    run label, the source for a node's batch of no run."""
    if path == RUNS_PATH:
        return Route(str(json.loads(body)["id"]))
    if path.startswith(RUNS_PATH + "/"):
        return Route(unquote(path[len(RUNS_PATH) + 1 :].split("/", 1)[0]))
    if content_type != BINARY_CONTENT_TYPE:
        raise ValueError(f"the broker carries binary batches, not {content_type!r}")
    batch = decode(body)
    runs = [key.label("run") for key in batch.keys] + [e.labels.get("run") for e in batch.events]
    key = next((run for run in runs if run is not None), batch.source)
    return Route(key, len(batch), batch.source)
