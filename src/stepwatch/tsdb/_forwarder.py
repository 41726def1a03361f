"""Forwarding committed samples to another time-series store: Prometheus-compatible ones by
remote write 1.0 (Prometheus with its receiver, VictoriaMetrics), InfluxDB by its line
protocol (``Wire``: how a batch becomes requests), for long-term and fleet-wide storage.

Ingest never waits for it: the writer's commit hands its batches over (an append), and a
thread of its own converts and sends them, up to ``max_samples_per_send`` a request. A
request that fails for a while (no answer, 5xx, 429) is tried again after a backoff that
doubles up to ``max_backoff_s``; one refused for good (another 4xx: out-of-order or bad
samples) is dropped. Whatever waits beyond ``max_pending_samples`` drops its oldest batches.
Every sample ends counted once: sent or dropped; ``retries`` counts the requests tried again.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import numpy as np

from .. import __version__
from .._worker import Worker
from ..model import SampleBatch, SeriesKey
from ._names import prometheus_label, prometheus_name
from ._write_request import TimeSeries, compress, write_request

__all__ = ["Forwarder", "ForwardCounts", "LINE_PROTOCOL", "REMOTE_WRITE", "Wire"]

log = logging.getLogger("stepwatch.tsdb")


@dataclass(frozen=True, slots=True)
class Wire:
    """How batches travel to one kind of store: a request's headers, and the requests of a
    batch, each with the samples it carries (those it leaves out are dropped)."""

    name: str
    headers: Mapping[str, str]
    requests: Callable[[SampleBatch, int], Iterator[tuple[bytes, int]]]


@dataclass
class ForwardCounts:
    """Samples sent and dropped, requests tried again, samples waiting."""

    sent: int = 0
    dropped: int = 0
    retries: int = 0
    pending: int = 0


class Forwarder(Worker):
    """A client of one store, fed by the collector's commits (``offer``).

    Args:
        url: the receiver (``http://prometheus:9090/api/v1/write``,
            ``http://influxdb:8086/write?db=stepwatch``).
        wire: how batches travel there (``REMOTE_WRITE``, ``LINE_PROTOCOL``).
        max_pending_samples: samples that may wait; beyond, the oldest batches are dropped.
        max_samples_per_send: samples a request carries at most.
        timeout_s: a request's time limit.
        max_backoff_s: the longest wait between tries of a failed request.
    """

    def __init__(
        self,
        url: str,
        wire: Wire,
        *,
        max_pending_samples: int = 2_000_000,
        max_samples_per_send: int = 10_000,
        timeout_s: float = 10.0,
        max_backoff_s: float = 30.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{wire.name} needs an http(s) URL, not {url!r}")
        self.target = parts.netloc.rpartition("@")[2]  # never the credentials in a URL
        self.wire = wire
        super().__init__(
            name=f"stepwatch-forward-{self.target}",
            failed=f"{wire.name} to {self.target} failed",
            log=log,
        )
        self._url, self._timeout_s = url, timeout_s
        self._max_pending, self._per_send = max_pending_samples, max_samples_per_send
        self._max_backoff_s = max_backoff_s
        self._pending: deque[SampleBatch] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._counts = ForwardCounts()

    @property
    def counts(self) -> ForwardCounts:
        """A copy of the counts now."""
        with self._lock:
            return ForwardCounts(**vars(self._counts))

    def offer(self, batches: Sequence[SampleBatch]) -> None:
        """Queue committed batches (the writer's commit hook: an append, never a wait)."""
        with self._lock:
            for batch in batches:
                if len(batch):
                    self._pending.append(batch)
                    self._counts.pending += len(batch)
            while self._counts.pending > self._max_pending and len(self._pending) > 1:
                self._dropped(self._pending[1])  # the oldest waiting: the first is in flight
                del self._pending[1]
        self._ready.set()

    def _dropped(self, batch: SampleBatch) -> None:
        self._counts.pending -= len(batch)
        self._counts.dropped += len(batch)

    def _woken(self) -> None:
        self._ready.set()

    def _run(self) -> None:
        headers = {"User-Agent": f"stepwatch/{__version__}", **self.wire.headers}
        with httpx.Client(timeout=self._timeout_s, headers=headers) as client:
            while not self.stopping:
                self._ready.wait()
                self._ready.clear()
                while not self.stopping and (batch := self._next()) is not None:
                    self.attempt(self._forward, client, batch)
        with self._lock:  # what never left, counted
            while self._pending:
                self._dropped(self._pending.popleft())

    def _next(self) -> SampleBatch | None:
        with self._lock:
            return self._pending[0] if self._pending else None

    def _forward(self, client: httpx.Client, batch: SampleBatch) -> None:
        """Send a batch, a request per ``max_samples_per_send`` samples; count each sample
        sent or dropped."""
        sent = 0
        try:
            for body, count in self.wire.requests(batch, self._per_send):
                if self._send(client, body):
                    sent += count
        finally:  # whatever was not sent (refused, left out, a stop) is dropped
            with self._lock:
                if self._pending and self._pending[0] is batch:
                    self._pending.popleft()
                    self._counts.pending -= len(batch)
                self._counts.sent += sent
                self._counts.dropped += len(batch) - sent

    def _send(self, client: httpx.Client, body: bytes) -> bool:
        """POST one request until it is taken (True) or refused for good (False); a stop
        gives up (False)."""
        backoff = 0.5
        while True:
            try:
                answer = client.post(self._url, content=body)
                if answer.is_success:
                    return True
                if answer.status_code != 429 and answer.status_code < 500:
                    refused = answer.status_code, answer.text[:200]
                    log.warning("%s to %s refused: %d %s", self.wire.name, self.target, *refused)
                    return False
                why = f"{answer.status_code}"
            except httpx.HTTPError as exc:
                why = type(exc).__name__
            with self._lock:
                self._counts.retries += 1
            log.debug("%s to %s: %s; again in %.1f s", self.wire.name, self.target, why, backoff)
            if self.pause(backoff):
                return False
            backoff = min(2 * backoff, self._max_backoff_s)


def _in_order(batch: SampleBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The batch's samples grouped by series, each in time order: series, ts, value, and
    where each series' run of samples starts."""
    order = np.lexsort((batch.ts, batch.series))
    series = batch.series[order]
    starts = np.r_[0, np.flatnonzero(np.diff(series)) + 1]
    return series, batch.ts[order], batch.value[order], starts


def _remote_write_requests(batch: SampleBatch, per_send: int) -> Iterator[tuple[bytes, int]]:
    """The batch's series, their samples in time order, in requests of at most ``per_send``
    samples (a series longer than that split across them); samples before 1970 are left out
    (remote write's milliseconds are not negative)."""
    series, ts, value, _ = _in_order(batch)
    ts_ms = np.round(ts * 1000.0).astype(np.int64)
    keep = ts_ms >= 0
    series, ts_ms, value = series[keep], ts_ms[keep], value[keep]
    bounds = np.flatnonzero(np.diff(series)) + 1
    out: list[TimeSeries] = []
    count = 0
    for lo, hi in zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(series)].tolist(), strict=True):
        labels, at = _labels(batch, int(series[lo])), lo
        while at < hi:
            take = min(hi - at, per_send - count)
            out.append(TimeSeries(labels, ts_ms[at : at + take], value[at : at + take]))
            count, at = count + take, at + take
            if count == per_send:
                yield compress(write_request(out)), count
                out, count = [], 0
    if out:
        yield compress(write_request(out)), count


def _labels(batch: SampleBatch, index: int) -> tuple[tuple[str, str], ...]:
    return _prometheus_labels(batch.keys[index])


@functools.lru_cache(maxsize=65_536)
def _prometheus_labels(key: SeriesKey) -> tuple[tuple[str, str], ...]:
    """A series' Prometheus labels, sorted, kept for its next batch."""
    labels = {prometheus_label(k): v for k, v in key.labels}
    return tuple(sorted((labels | {"__name__": prometheus_name(key.name)}).items()))


def _line_protocol_requests(batch: SampleBatch, per_send: int) -> Iterator[tuple[bytes, int]]:
    """The batch's samples as InfluxDB lines (``measurement,tag=v value=x ns``), up to
    ``per_send`` a request; non-finite values are left out (a line cannot carry them)."""
    series, ts, value, starts = _in_order(batch)
    ends = np.r_[starts[1:], len(series)]
    heads = {int(series[i]): _line_head(batch, int(series[i])) for i in starts.tolist()}
    lines: list[str] = []
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        head = heads[int(series[lo])]
        ns = np.round(ts[lo:hi] * 1e9).astype(np.int64).tolist()
        for v, t in zip(value[lo:hi].tolist(), ns, strict=True):
            if math.isfinite(v):
                lines.append(f"{head} value={v!r} {t}")
                if len(lines) == per_send:
                    yield "\n".join(lines).encode(), len(lines)
                    lines = []
    if lines:
        yield "\n".join(lines).encode(), len(lines)


def _line_head(batch: SampleBatch, index: int) -> str:
    """A series' measurement (its Prometheus name) and tags, escaped as line protocol asks."""
    key = batch.keys[index]
    tags = "".join(
        f",{_escape(prometheus_label(k))}={_escape(v)}" for k, v in sorted(key.labels) if v
    )
    return _escape(prometheus_name(key.name)) + tags


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


REMOTE_WRITE = Wire(
    "remote write",
    {
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "snappy",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
    },
    _remote_write_requests,
)
LINE_PROTOCOL = Wire(
    "line protocol", {"Content-Type": "text/plain; charset=utf-8"}, _line_protocol_requests
)
