"""GET /metrics: the collector's own figures in Prometheus' text exposition.

A custom collector reads the counters and queues the parts keep already at scrape time, so
the hot paths pay nothing for being watched; only the group commit's latency is a histogram
the writer feeds. The registry is the app's own (never the process-wide one): several
collectors may live in one process. No figure carries a run or a project name, so the route
may be open to any scraper (``--metrics-public``) without telling one tenant of another.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry, Histogram, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from .. import __version__
from ..act import Notifier, Remediation
from ..auth import Permission
from ..detect import LiveDetector
from ..model import DROPPED_SAMPLES
from ..store import Store
from ..tsdb import Forwarder
from ._auth import PUBLIC, need
from ._fleet_api import FleetSlot
from ._ingest import WIRE_FORMATS, IngestStats
from ._readiness import Readiness
from ._writer import GroupWriter

if TYPE_CHECKING:
    from ._analyst import Analyst

__all__ = ["COMMIT_BUCKETS_S", "Parts", "StoreFigures", "metrics_registry", "metrics_router"]

log = logging.getLogger("stepwatch.server")

#: Group commits take milliseconds when all is well and seconds when the disk struggles.
COMMIT_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: How long row counts of the store are reused: counting a large table is a scan.
STORE_STATS_MAX_AGE_S = 30.0
_TEXT = {"schema": {"type": "string"}}


class StoreFigures:
    """``Store.stats`` and the producers' spool reports at most once per ``max_age_s``,
    whatever the scrape interval."""

    def __init__(
        self,
        store: Store,
        max_age_s: float = STORE_STATS_MAX_AGE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self._max_age_s, self._monotonic = store, max_age_s, monotonic
        self._lock = threading.Lock()  # two scrapes at once count once
        self._stats: dict[str, int] | None = None
        self._at = 0.0

    def stats(self) -> dict[str, int] | None:
        """The latest counts (None before the first, or once the store is closed)."""
        with self._lock:
            if self._store.closed:
                return None
            now = self._monotonic()
            if self._stats is None or now - self._at >= self._max_age_s:
                self._stats, self._at = self._store.stats() | self._spools(), now
            return self._stats

    def memory_bytes(self) -> int | None:
        """What DuckDB holds in memory for the store now (cheap: asked at every scrape)."""
        return None if self._store.closed else self._store.footprint.memory_bytes()

    def _spools(self) -> dict[str, int]:
        """What producers told of their spools: the newest count of samples each dropped
        (a full spool), in the one series they report it in; the collector sees no more of
        a spool than that."""
        counts = [v for *_, v in self._store.latest(DROPPED_SAMPLES) if math.isfinite(v)]
        return {
            "spool_dropped_samples": int(sum(counts)),
            "spool_dropping_producers": sum(1 for v in counts if v > 0),
        }


@dataclass(frozen=True)
class Parts:
    """What the figures are read from: the parts of one collector."""

    ingest: IngestStats
    writer: GroupWriter
    live: LiveDetector
    notifier: Notifier | None
    remediation: Remediation
    store: StoreFigures
    readiness: Readiness
    clock: Callable[[], float] = time.time
    forwarders: Sequence[Forwarder] = ()
    fleet: FleetSlot | None = None
    analyst: Analyst | None = None


def _counter(
    name: str, doc: str, labels: tuple[str, ...], values: Mapping[Any, float]
) -> CounterMetricFamily:
    """A counter family with one sample per key of ``values`` (a label value, or a tuple)."""
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], value)
    return family


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class Figures(Collector):
    """The collector's figures, read from its parts at each scrape."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    def collect(self) -> Iterator[Metric]:
        """Every family; a part that fails to answer is logged and left out of this scrape."""
        for family in (
            self._about,
            self._ingest,
            self._writer,
            self._detection,
            self._alerts,
            self._notifications,
            self._playbooks,
            self._analyses,
            self._store,
            self._forwarding,
            self._broker,
        ):
            try:
                yield from family()
            except Exception:
                log.exception("metrics: %s could not be read", family.__name__.strip("_"))

    def _forwarding(self) -> Iterator[Metric]:
        counts = {(f.wire.name, f.target): f.counts for f in self.parts.forwarders}
        if not counts:
            return
        yield _counter(
            "stepwatch_forward_samples_total",
            "Samples forwarded to other stores, by protocol and receiver: sent, or dropped "
            "(refused for good, not expressible there, or beyond the queue's bound).",
            ("protocol", "target", "outcome"),
            {(*k, o): getattr(c, o) for k, c in counts.items() for o in ("sent", "dropped")},
        )
        yield _counter(
            "stepwatch_forward_retries_total",
            "Requests to other stores tried again (no answer, 5xx or 429).",
            ("protocol", "target"),
            {k: c.retries for k, c in counts.items()},
        )
        family = GaugeMetricFamily(
            "stepwatch_forward_pending_samples",
            "Samples waiting to be forwarded, by protocol and receiver.",
            labels=("protocol", "target"),
        )
        for key, c in sorted(counts.items()):
            family.add_metric(list(key), c.pending)
        yield family

    def _broker(self) -> Iterator[Metric]:
        intake = self.parts.fleet.intake if self.parts.fleet else None
        if intake is None:
            return
        yield _counter(
            "stepwatch_broker_messages_total",
            "Messages read from the broker: taken (stored, or a duplicate), refused for good "
            "(a wrong token or body, dropped) or retried (the collector could not take it yet).",
            ("outcome",),
            {o.value: n for o, n in intake.counts().items()},
        )
        yield _gauge(
            "stepwatch_broker_partitions_read",
            "Partitions of the broker this collector reads now.",
            len(intake.reading()),
        )
        yield _gauge(
            "stepwatch_fleet_members",
            "Collectors heard on the broker lately, this one included.",
            len(intake.members.alive()),
        )

    def _about(self) -> Iterator[Metric]:
        yield InfoMetricFamily(
            "stepwatch_build", "The collector's version.", {"version": __version__}
        )
        ready = self.parts.readiness.not_ready() is None
        yield _gauge("stepwatch_ready", "1 when /readyz says ready, else 0.", float(ready))

    def _ingest(self) -> Iterator[Metric]:
        stats = self.parts.ingest
        for name, doc, counts in (
            ("stepwatch_ingest_batches", "Batches applied, by wire format.", stats.batches),
            (
                "stepwatch_ingest_duplicate_batches",
                "Batches applied before (a retry).",
                stats.duplicates,
            ),
            ("stepwatch_ingest_samples", "Samples applied, by wire format.", stats.samples),
            ("stepwatch_ingest_events", "Events applied, by wire format.", stats.events),
        ):
            yield _counter(name, doc, ("format",), {w: counts[w] for w in WIRE_FORMATS})
        counted = dict(stats.rejected)  # one step under the GIL: the event loop adds keys
        rejected = {(str(status), reason): n for (status, reason), n in counted.items()}
        yield _counter(
            "stepwatch_ingest_rejected_batches",
            "Ingest requests refused, by HTTP status and cause.",
            ("code", "reason"),
            rejected,
        )

    def _writer(self) -> Iterator[Metric]:
        rows, batches = self.parts.writer.queued
        yield _gauge(
            "stepwatch_writer_queued_rows", "Samples and events waiting for the store.", rows
        )
        yield _gauge("stepwatch_writer_queued_batches", "Batches waiting for the store.", batches)

    def _detection(self) -> Iterator[Metric]:
        live = self.parts.live
        stats = live.stats
        yield _gauge(
            "stepwatch_detection_queued_samples",
            "Samples committed, not yet detected on.",
            live.queued,
        )
        if live.data_now > float("-inf"):
            lag = self.parts.clock() - live.data_now
            yield _gauge(
                "stepwatch_detection_lag_seconds",
                "Wall time minus the newest data time detection has seen.",
                lag,
            )
        for name, doc, value in (
            ("stepwatch_detection_samples", "Samples detection has seen.", stats.samples),
            (
                "stepwatch_detection_dropped_samples",
                "Samples that skipped detection: its queue was full.",
                stats.dropped,
            ),
            (
                "stepwatch_detection_late_samples",
                "Samples whose time was raised to keep time order.",
                stats.late,
            ),
            ("stepwatch_detection_errors", "Detection steps that failed (logged).", stats.errors),
            (
                "stepwatch_alert_transitions",
                "Alert transitions detection recorded.",
                stats.transitions,
            ),
        ):
            yield CounterMetricFamily(name, doc, value=value)

    def _alerts(self) -> Iterator[Metric]:
        firing = Counter((a.kind, a.severity) for a in self.parts.live.firing())
        family = GaugeMetricFamily(
            "stepwatch_alerts_firing",
            "Alerts firing now, by kind and severity.",
            labels=("kind", "severity"),
        )
        for (kind, severity), n in sorted(firing.items()):
            family.add_metric([kind, severity], n)
        yield family

    def _notifications(self) -> Iterator[Metric]:
        notifier = self.parts.notifier
        if notifier is None:
            return
        yield _counter(
            "stepwatch_notifications",
            "Notifications sent (ok) or given up on (failed), by receiver.",
            ("receiver", "result"),
            notifier.outcomes(),
        )
        yield CounterMetricFamily(
            "stepwatch_notification_dropped_transitions",
            "Alert transitions the notifier dropped: it was too far behind.",
            value=notifier.dropped,
        )

    def _analyses(self) -> Iterator[Metric]:
        analyst = self.parts.analyst
        if analyst is None:
            return
        yield _counter(
            "stepwatch_incident_analyses",
            "Incidents the analyst model was asked about, by outcome (ok, timeout, "
            "unreachable, http_error, bad_answer).",
            ("result",),
            {"ok": 0} | dict(analyst.outcomes),
        )

    def _playbooks(self) -> Iterator[Metric]:
        runs = dict(self.parts.remediation.runs)
        yield _counter(
            "stepwatch_playbook_runs",
            "Playbook runs by result (ok, dry-run, failed, timeout).",
            ("result",),
            {r: runs.get(r, 0) for r in ("ok", "dry-run", "failed", "timeout")} | runs,
        )

    def _store(self) -> Iterator[Metric]:
        memory = self.parts.store.memory_bytes()
        if memory is not None:
            yield _gauge(
                "stepwatch_store_memory_bytes",
                "Memory DuckDB holds for the store (cached blocks, indexes, rows not yet "
                "checkpointed), part of the process' resident memory.",
                memory,
            )
        stats = self.parts.store.stats()
        if stats is None:
            return
        yield _gauge(
            "stepwatch_store_file_bytes", "Size of the store's files on disk.", stats["file_bytes"]
        )
        rows = GaugeMetricFamily(
            "stepwatch_store_rows", "Rows in the store, by table.", labels=("table",)
        )
        for table in ("samples", "series", "runs", "events", "records"):
            rows.add_metric([table], stats[table])
        yield rows
        yield _gauge(
            "stepwatch_store_resident_series",
            "Series of runs the store holds in memory: those of the runs written to lately "
            "(ended runs' are read back from the file when asked for).",
            stats["resident_series"],
        )
        yield _gauge(
            "stepwatch_store_uncompacted_rows",
            "Samples not yet compacted into the store's tiers.",
            stats["uncompacted"],
        )
        yield _gauge(
            "stepwatch_spool_dropped_samples",
            "Samples producers dropped because their spools were full, as each last "
            "reported, summed over the data the store keeps.",
            stats["spool_dropped_samples"],
        )
        yield _gauge(
            "stepwatch_spool_dropping_producers",
            "Producers that reported dropping samples (a full spool), in the data kept.",
            stats["spool_dropping_producers"],
        )


def metrics_registry(parts: Parts) -> CollectorRegistry:
    """A registry of the collector's own: its figures, the commit latency histogram (fed by
    the writer) and the process' CPU, memory and file descriptors."""
    registry = CollectorRegistry()
    commits = Histogram(
        "stepwatch_writer_commit_seconds",
        "Duration of one group commit of batches into the store.",
        buckets=COMMIT_BUCKETS_S,
        registry=registry,
    )
    parts.writer.on_commit_seconds.append(commits.observe)
    ProcessCollector(registry=registry)
    registry.register(Figures(parts))
    return registry


def metrics_router(registry: CollectorRegistry, *, public: bool) -> APIRouter:
    """GET /metrics: for tokens that may read (figures by kind), or for anyone when ``public``."""
    router = APIRouter(dependencies=[PUBLIC if public else need(Permission.READ)])
    content = {"text/plain": _TEXT, "application/openmetrics-text": _TEXT}

    @router.get("/metrics", response_class=Response, responses={200: {"content": content}})
    def metrics(request: Request) -> Response:
        """The collector's own figures, in the format the scraper asks for."""
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), media_type=content_type)

    return router
