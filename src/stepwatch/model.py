"""Shared types every layer speaks: series keys, sample batches, events, runs.

Kept free of I/O so that the SDK, the wire codec, the store and the server can
all import it without pulling each other in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "MAX_ABS_TS_S",
    "MAX_INT64",
    "NO_STEP",
    "ALIASES",
    "DROPPED_SAMPLES",
    "GPU_METRICS",
    "HOST_METRICS",
    "COLLECTOR_METRIC_PREFIX",
    "RECORD_KINDS",
    "RESERVED_SOURCE_PREFIX",
    "Event",
    "RecordBatch",
    "Run",
    "RunStatus",
    "SampleBatch",
    "SeriesKey",
    "canonical_name",
    "check_producer_batch",
    "is_timestamp",
    "validate_label",
]

#: Event kinds only the collector writes (alerts, acks, silences, commands and their answers,
#: actions and their approvals, audit, rule reloads): on ingest they are refused, never stored.
RECORD_KINDS: frozenset[str] = frozenset(
    {
        "alert",
        "alert_ack",
        "silence",
        "silence_expired",
        "command",
        "command_ack",
        "action",
        "approval",
        "audit",
        "rules_loaded",
        "rules_error",
    }
)
#: Sources under this prefix are the collector's own; no producer may claim one.
RESERVED_SOURCE_PREFIX = "stepwatch."
#: Metrics the collector writes about itself (its store's size...); no producer may write one.
COLLECTOR_METRIC_PREFIX = "stepwatch.collector."

#: Step column value meaning "this sample has no optimizer step" (hardware metrics).
NO_STEP = -1
#: A producer's count of the samples it dropped because its spool was full (cumulative).
DROPPED_SAMPLES = "stepwatch.dropped_samples"
#: The largest seq or step the store's 64-bit integer columns hold.
MAX_INT64 = 2**63 - 1
#: Timestamps are seconds since the epoch within this of it (some 3000 years either way):
#: further out, tier buckets and query plans would overflow 64-bit integers.
MAX_ABS_TS_S = 1e11


def is_timestamp(t: float) -> bool:
    """A time the store can bucket: finite and within ``MAX_ABS_TS_S`` of the epoch."""
    return -MAX_ABS_TS_S <= t <= MAX_ABS_TS_S  # NaN compares false


#: Users' bare names and the vocabulary names they stand for (../ANOMALIES.md).
ALIASES: dict[str, str] = {
    "loss": "train.loss",
    "lr": "train.lr",
    "learning_rate": "train.lr",
    "grad_norm": "train.grad_norm",
    "tokens_per_s": "train.tokens_per_s",
    "step_time_s": "train.step_time_s",
    "data_time_s": "train.data_time_s",
    "compute_time_s": "train.compute_time_s",
    "comm_time_s": "train.comm_time_s",
}

#: The vocabulary's per-GPU metrics (NVML, DCGM and the like).
GPU_METRICS = (
    "gpu.util_pct",
    "gpu.mem_used_bytes",
    "gpu.mem_total_bytes",
    "gpu.temp_c",
    "gpu.power_w",
    "gpu.power_limit_w",
    "gpu.throttle_reasons",
    "gpu.xid_errors",
    "gpu.ecc_errors",
)

#: The vocabulary's per-node host metrics (psutil, node_exporter).
HOST_METRICS = (
    "host.cpu_pct",
    "host.cpu_core_max_pct",
    "host.mem_used_bytes",
    "host.mem_total_bytes",
    "host.net_rx_bytes_per_s",
    "host.net_tx_bytes_per_s",
    "host.disk_write_bytes_per_s",
    "host.disk_free_bytes",
)

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]{0,199}$")
_LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class RunStatus:
    """The states a run goes through; strings so they read well in JSON and SQL."""

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    KILLED = "killed"
    ALL = (RUNNING, FINISHED, FAILED, KILLED)


def canonical_name(name: str) -> str:
    """Map a user's metric name onto the vocabulary, rejecting names we cannot store."""
    if not isinstance(name, str):
        raise TypeError(f"metric name must be a str, got {type(name).__name__}")
    name = ALIASES.get(name, name)
    if not _NAME_RE.match(name):
        raise ValueError(
            f"invalid metric name {name!r}: use letters, digits and . _ : / -, "
            "starting with a letter or _, at most 200 characters"
        )
    return name


def validate_label(key: str, value: object) -> str:
    """Return the label value as a string, or raise a clear error for a bad label."""
    if not isinstance(key, str) or not _LABEL_RE.match(key):
        raise ValueError(f"invalid label name {key!r}: use [A-Za-z_][A-Za-z0-9_]*")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"label {key!r} must be a str or int, got {type(value).__name__}")
    text = str(value)
    if len(text) > 256:
        raise ValueError(f"label {key!r} is longer than 256 characters")
    return text


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """A metric name plus its labels (run, node, rank, gpu...), sorted: equal keys hash equal."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, labels: Mapping[str, object] | None = None) -> SeriesKey:
        checked = {k: validate_label(k, v) for k, v in (labels or {}).items()}
        return cls(canonical_name(name), tuple(sorted(checked.items())))

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "labels": dict(self.labels)}


@dataclass(slots=True)
class Event:
    """Something that happened at a point in time: a log line, a checkpoint, an alert, an action."""

    ts: float
    kind: str
    text: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "kind": self.kind,
            "text": self.text,
            "labels": dict(self.labels),
            "data": dict(self.data),
        }


@dataclass(slots=True)
class SampleBatch:
    """The unit of transport and idempotency: (source, seq) plus typed columns.

    Column ``series`` indexes into ``keys``; ``step`` is NO_STEP where a sample
    has no optimizer step. Values keep NaN and +-Inf.
    """

    source: str
    seq: int
    keys: list[SeriesKey]
    series: np.ndarray  # uint32
    ts: np.ndarray  # float64
    step: np.ndarray  # int64
    value: np.ndarray  # float64
    events: list[Event] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.series.shape[0])

    def check(self) -> None:
        """Raise ValueError when the columns disagree with each other or with the keys."""
        n = len(self)
        for col in ("ts", "step", "value"):
            if getattr(self, col).shape != (n,):
                raise ValueError(
                    f"column {col!r} has {getattr(self, col).shape[0]} rows, expected {n}"
                )
        if n and int(self.series.max()) >= len(self.keys):
            raise ValueError(
                f"series index {int(self.series.max())} out of range: "
                f"batch defines {len(self.keys)} series"
            )
        if n and not (np.abs(self.ts) <= MAX_ABS_TS_S).all():
            raise ValueError(
                f"timestamps must be finite numbers of seconds within ±{MAX_ABS_TS_S:g}"
            )
        if not 0 <= self.seq <= MAX_INT64:
            raise ValueError(f"seq must be in [0, {MAX_INT64}]")


@dataclass(slots=True)
class RecordBatch(SampleBatch):
    """The collector's own records: the type, set in code and never decoded from the wire, is
    what sends them to the store's records table, so no ingested batch can become one."""

    @classmethod
    def of(cls, source: str, events: list[Event]) -> RecordBatch:
        empty = np.empty(0, np.float64)
        return cls(
            source, 0, [], np.empty(0, np.uint32), empty, np.empty(0, np.int64), empty, events
        )


def check_producer_batch(batch: SampleBatch) -> None:
    """Raise ValueError, naming it, for a source or an event kind only the collector may use."""
    if batch.source.startswith(RESERVED_SOURCE_PREFIX):
        raise ValueError(
            f"source {batch.source!r} is reserved for the collector "
            f"(no source may start with {RESERVED_SOURCE_PREFIX!r})"
        )
    for key in batch.keys:
        if key.name.startswith(COLLECTOR_METRIC_PREFIX):
            raise ValueError(f"metric {key.name!r} is the collector's own: no producer writes it")
    for event in batch.events:
        if event.kind in RECORD_KINDS:
            raise ValueError(
                f"event kind {event.kind!r} is reserved for the collector's own records"
            )


@dataclass(slots=True)
class Run:
    """A training run as the store and API know it."""

    id: str
    project: str = "default"
    name: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    status: str = RunStatus.RUNNING
    start: float = 0.0
    end: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    planned_total_steps: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "project": self.project,
            "name": self.name,
            "config": self.config,
            "status": self.status,
            "start": self.start,
            "end": self.end,
            "labels": dict(self.labels),
            "planned_total_steps": self.planned_total_steps,
        }
