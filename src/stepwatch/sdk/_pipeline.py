"""The path every producer's samples take: buffer → writer → spool → sender, plus a heartbeat.

The SDK's Run and the node agent both feed one of these, so durability,
shipping and liveness behave the same whichever process produced the data.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..model import DROPPED_SAMPLES, NO_STEP, SeriesKey
from ..model import Run as RunRecord
from ..spool import (
    ClientTls,
    Connect,
    OrphanShipper,
    Sealer,
    Sender,
    Spool,
    SpoolLock,
    open_transport,
    remove_delivered,
    remove_run_dir,
)
from ._buffer import Buffer, SeriesTable
from ._ticker import Ticker
from ._writer import BatchWriter

__all__ = ["DROPPED_SAMPLES", "HEARTBEAT", "Pipeline"]

#: Liveness: seconds since the producer started, sent every ``heartbeat_s`` even when idle,
#: so a silent node can be told from a quiet one.
HEARTBEAT = "stepwatch.heartbeat_s"


class Pipeline:
    """One producer's buffered, durable, shipped stream of samples and events.

    Args:
        spool_dir: this producer's own spool directory.
        source: the producer's source id (batches are numbered per source).
        labels: labels of the producer's own series (dropped samples, heartbeat).
        server, token, tls, connect: where and how to ship; no server means spool only.
        transport: a broker (``amqp://``) the batches go to instead of ``server``.
        run: the run record the sender creates on the collector first (None: no run).
        flush_interval_s, flush_samples: flush every interval, or sooner once this many wait.
        max_spool_bytes: the spool's cap (None: none); past it new batches are dropped, counted.
        heartbeat_s: how often the heartbeat sample is added (None: never).
        sealer: seals what is spooled (None: plain records).
        orphans: a spool root whose orphaned spools (writer gone) this producer ships in the
            background to its own server (None: leave them); ``orphans_rescan_s``: how often
            it looks again (None: once).
    """

    def __init__(
        self,
        spool_dir: Path,
        source: str,
        labels: Mapping[str, str],
        *,
        server: str | None,
        token: str | None = None,
        tls: ClientTls | None = None,
        transport: str | None = None,
        run: Callable[[], RunRecord] | None = None,
        flush_interval_s: float = 1.0,
        flush_samples: int = 50_000,
        max_spool_bytes: int | None = None,
        heartbeat_s: float | None = 5.0,
        wall: Callable[[], float] = time.time,
        connect: Connect | None = None,
        sealer: Sealer | None = None,
        orphans: Path | None = None,
        orphans_rescan_s: float | None = None,
    ) -> None:
        if flush_samples < 1 or flush_interval_s <= 0:
            raise ValueError("flush_samples must be >= 1 and flush_interval_s > 0")
        self.source, self._wall, self._flush_samples = source, wall, flush_samples
        self.table, self._buffer = SeriesTable(), Buffer()
        # the clients first: a bad URL or TLS file is refused before the spool's lock is held
        to = transport or server
        client = open_transport(to, token, tls=tls, connect=connect) if to else None
        orphan_client = None
        if to and orphans is not None:
            orphan_client = open_transport(to, token, tls=tls, connect=connect)
        self._lock = _own(spool_dir)
        self.spool = Spool(spool_dir, max_bytes=max_spool_bytes, sealer=sealer)
        self.sender: Sender | None = None
        if client is not None:
            self.sender = Sender(self.spool, client, run, name=f"stepwatch-send-{source}")
        self._orphans: OrphanShipper | None = None
        if orphan_client is not None and orphans is not None:
            self._orphans = OrphanShipper(orphans, orphan_client, sealer, rescan_s=orphans_rescan_s)
        self._writer = BatchWriter(
            self._buffer,
            self.table,
            self.spool,
            source,
            self.table.intern(SeriesKey.of(DROPPED_SAMPLES, labels)),
            wall,
            self.sender.notify if self.sender else lambda: None,
        )
        self._heartbeat = self.table.intern(SeriesKey.of(HEARTBEAT, labels))
        self._heartbeat_s, self._started = heartbeat_s, wall()
        self._beat_due = self._started
        self._ticker = Ticker(self._tick, flush_interval_s, name=f"stepwatch-flush-{source}")
        self._ticker.start()
        if self.sender:
            self.sender.start()
        if self._orphans:
            self._orphans.start()

    @property
    def durable_samples(self) -> int:
        """Samples appended so far that are durably written to the spool."""
        return self._writer.written_samples

    @property
    def dropped_samples(self) -> int:
        """Samples lost because the spool was full (or unwritable)."""
        return self._writer.dropped_samples

    def intern(self, key: SeriesKey) -> int:
        """The id of a series for ``append``."""
        return self.table.intern(key)

    def append(self, series: list[int], values: list[float], ts: float, step: int) -> None:
        """Buffer one call's samples (all at ``ts``/``step``; the lists are kept, not copied: pass
        fresh ones); flush early once the buffer fills."""
        if self._buffer.append(series, values, ts, step) >= self._flush_samples:
            self._ticker.wake()

    def add_event(self, event: Mapping[str, Any]) -> None:
        """Queue an event (``model.Event.as_dict()`` shape) for the next batch."""
        self._buffer.add_event(dict(event))

    def flush(self) -> None:
        """Block until everything appended so far is durable in the spool."""
        self._writer.flush()

    def _tick(self) -> None:
        now = self._wall()
        if self._heartbeat_s is not None and now >= self._beat_due:
            self._buffer.append([self._heartbeat], [now - self._started], now, NO_STEP)
            self._beat_due = now + self._heartbeat_s
        self._writer.flush()

    def close(self, timeout_s: float, finish: RunRecord | None = None) -> bool:
        """Flush, then ship what is left (and ``finish``) for at most ``timeout_s``.

        Returns True when everything was delivered: the spool's directory is then deleted
        (and the run's, once it holds no other spool); else the rest stays in the spool.
        """
        try:
            self._ticker.close()
            self._writer.close()
        finally:
            if self._orphans:
                self._orphans.close()
            delivered = self.sender.close(timeout_s, finish) if self.sender else False
            self.spool.close()
            if delivered and remove_delivered(self.spool.path, self._lock):
                remove_run_dir(self.spool.path.parent)
            self._lock.release()
        return delivered


def _own(spool_dir: Path) -> SpoolLock:
    """Take the lock of a producer's own (new) spool directory, held until it closes: while
    it is held, nobody else ships this spool."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    lock = SpoolLock.take(spool_dir)
    if lock is None:
        raise RuntimeError(f"spool {spool_dir} is in use by another process")
    return lock
