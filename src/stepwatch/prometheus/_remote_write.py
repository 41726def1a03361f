"""Forwarding committed samples to a Prometheus-compatible store (Prometheus with its
remote-write receiver, VictoriaMetrics, ...) by remote write 1.0, for long-term and
fleet-wide storage.

Ingest never waits for it: the writer's commit hands its batches over (an append), and a
thread of its own converts and sends them, up to ``max_samples_per_send`` a request. A
request that fails for a while (no answer, 5xx, 429) is tried again after a backoff that
doubles up to ``max_backoff_s``; one refused for good (another 4xx: out-of-order or bad
samples) is dropped. Whatever waits beyond ``max_pending_samples`` drops its oldest batches.
Every sample ends counted once: sent or dropped; ``retries`` counts the requests tried again.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import numpy as np

from .. import __version__
from .._worker import Worker
from ..model import SampleBatch
from ._names import prometheus_label, prometheus_name
from ._write_request import TimeSeries, compress, write_request

__all__ = ["RemoteWriteCounts", "RemoteWriter"]

log = logging.getLogger("stepwatch.prometheus")

HEADERS = {
    "Content-Type": "application/x-protobuf",
    "Content-Encoding": "snappy",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
    "User-Agent": f"stepwatch/{__version__}",
}


@dataclass
class RemoteWriteCounts:
    """Samples sent and dropped, requests tried again, samples waiting."""

    sent: int = 0
    dropped: int = 0
    retries: int = 0
    pending: int = 0


class RemoteWriter(Worker):
    """A remote-write client fed by the collector's commits (``offer``).

    Args:
        url: the receiver (``http://prometheus:9090/api/v1/write``).
        max_pending_samples: samples that may wait; beyond, the oldest batches are dropped.
        max_samples_per_send: samples a request carries at most.
        timeout_s: a request's time limit.
        max_backoff_s: the longest wait between tries of a failed request.
    """

    def __init__(
        self,
        url: str,
        *,
        max_pending_samples: int = 2_000_000,
        max_samples_per_send: int = 10_000,
        timeout_s: float = 10.0,
        max_backoff_s: float = 30.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"remote write needs an http(s) URL, not {url!r}")
        self.target = parts.netloc.rpartition("@")[2]  # never the credentials in a URL
        super().__init__(
            name=f"stepwatch-remote-write-{self.target}",
            failed=f"remote write to {self.target} failed",
            log=log,
        )
        self._url, self._timeout_s = url, timeout_s
        self._max_pending, self._per_send = max_pending_samples, max_samples_per_send
        self._max_backoff_s = max_backoff_s
        self._pending: deque[SampleBatch] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._counts = RemoteWriteCounts()

    @property
    def counts(self) -> RemoteWriteCounts:
        """A copy of the counts now."""
        with self._lock:
            return RemoteWriteCounts(**vars(self._counts))

    def offer(self, batches: Sequence[SampleBatch]) -> None:
        """Queue committed batches (the writer's commit hook: an append, never a wait)."""
        with self._lock:
            for batch in batches:
                if len(batch):
                    self._pending.append(batch)
                    self._counts.pending += len(batch)
            while self._counts.pending > self._max_pending and len(self._pending) > 1:
                self._dropped(self._pending.popleft())
        self._ready.set()

    def _dropped(self, batch: SampleBatch) -> None:
        self._counts.pending -= len(batch)
        self._counts.dropped += len(batch)

    def _woken(self) -> None:
        self._ready.set()

    def _run(self) -> None:
        with httpx.Client(timeout=self._timeout_s, headers=HEADERS) as client:
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
            for series, count in _requests(batch, self._per_send):
                if self._send(client, compress(write_request(series))):
                    sent += count
        finally:  # whatever was not sent (refused, before 1970, a stop) is dropped
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
                    log.warning(
                        "remote write to %s refused a request: %d %s", self.target, *refused
                    )
                    return False
                why = f"{answer.status_code}"
            except httpx.HTTPError as exc:
                why = type(exc).__name__
            with self._lock:
                self._counts.retries += 1
            log.debug("remote write to %s: %s; again in %.1f s", self.target, why, backoff)
            if self.pause(backoff):
                return False
            backoff = min(2 * backoff, self._max_backoff_s)


def _requests(batch: SampleBatch, per_send: int) -> Iterator[tuple[list[TimeSeries], int]]:
    """The batch's series, their samples in time order, in requests of at most ``per_send``
    samples (a series longer than that split across them); samples before 1970 are left out
    (remote write's milliseconds are not negative) and so counted dropped."""
    order = np.lexsort((batch.ts, batch.series))
    series, ts, value = batch.series[order], batch.ts[order], batch.value[order]
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
                yield out, count
                out, count = [], 0
    if out:
        yield out, count


def _labels(batch: SampleBatch, index: int) -> list[tuple[str, str]]:
    key = batch.keys[index]
    labels = {prometheus_label(k): v for k, v in key.labels} | {
        "__name__": prometheus_name(key.name)
    }
    return sorted(labels.items())
