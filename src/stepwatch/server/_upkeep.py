"""The store's upkeep in the collector: retention applied continuously, the store's size
watched against its limit, the oldest data shed before the limit is reached, the write-ahead
log checkpointed into the file as it grows (else the rows it holds stay in memory).

The size goes to live detection as series of the collector's own (``stepwatch.collector.*``,
which no producer may write), so the built-in rule ``store_disk_full`` raises an ordinary
alert from them: recorded, listed, silenced, grouped, notified and resolved like every other,
with no path of its own. They are not stored: a sample every few seconds forever would be
data nobody sent, in every count and listing of the store (``/metrics`` carries the sizes).
Ingest is refused (507) only while the store is at its limit and nothing is left to shed.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence

import numpy as np
import psutil

from .._periodic import Periodic
from .._sizes import parse_size_or_share
from ..model import COLLECTOR_METRIC_PREFIX, NO_STEP, RecordBatch, SampleBatch, SeriesKey
from ..store import DEFAULT_RETENTION, DiskCap, Retention, Space, Store
from ._event_log import COLLECTOR_SOURCE

__all__ = ["SHED_AT", "StoreUpkeep", "store_limits", "store_memory_limit"]

log = logging.getLogger("stepwatch.server")

#: The store's size over its limit, its size and its limit (bytes), every tick.
USED_RATIO = f"{COLLECTOR_METRIC_PREFIX}store_used_ratio"
USED_BYTES = f"{COLLECTOR_METRIC_PREFIX}store_used_bytes"
LIMIT_BYTES = f"{COLLECTOR_METRIC_PREFIX}store_limit_bytes"
_KEYS = [SeriesKey.of(USED_RATIO), SeriesKey.of(USED_BYTES), SeriesKey.of(LIMIT_BYTES)]
#: Shedding starts at this share of the limit (the alert fires at 80 %, see builtin.yaml).
SHED_AT = 0.95
#: Steps of shedding per tick at most: sizes lag behind deletes, so the next tick looks again.
_SHED_STEPS = 5


class StoreUpkeep:
    """A thread that, every ``interval_s``, applies ``retention`` (cheap when nothing is due:
    each table's deletes skip the row groups past its horizon) and measures the store against
    ``cap``, shedding near the limit."""

    def __init__(
        self,
        store: Store,
        feed: Callable[[Sequence[SampleBatch]], None],
        retention: Retention = DEFAULT_RETENTION,
        cap: DiskCap | None = None,
        *,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        disk_usage: Callable[..., object] = shutil.disk_usage,
    ) -> None:
        self._store, self._feed = store, feed
        self._retention, self._cap = retention, cap or DiskCap()
        self._clock, self._disk_usage = clock, disk_usage
        self._full = False
        self._worker = Periodic(
            self.tick,
            interval_s,
            name="stepwatch-upkeep",
            failed=f"store upkeep failed; trying again in {interval_s:g} s",
            log=log,
        )

    @property
    def full(self) -> bool:
        """At the limit with nothing left to shed: ingest answers 507 until room is made."""
        return self._full

    def start(self) -> StoreUpkeep:
        self._worker.start()
        return self

    def stop(self) -> None:
        """End the thread after the chunk it is deleting, if any."""
        self._worker.stop()

    def tick(self) -> None:
        """Retention, then the size: shed when near the limit, and write the size down; then
        a checkpoint when the log grew (what it holds is held in memory too)."""
        self._retain()
        space, left = self._measure(), True
        for _ in range(_SHED_STEPS):
            if space.ratio < SHED_AT or self._worker.stopping:
                break
            left = self._shed(space)
            if not left:
                break
            space = self._measure()
        full = space.ratio >= 1.0 and not left
        if full and not self._full:
            log.error(
                "the store takes %d of its %d bytes (limit: %s, less what its file system keeps "
                "free) and has nothing left to shed: ingest is refused until there is room",
                space.used_bytes,
                space.limit_bytes,
                self._cap,
            )
        self._full = full
        self._report(space)
        self._store.footprint.checkpoint()

    def _retain(self) -> None:
        done = self._store.retention.retain(self._retention, stop=lambda: self._worker.stopping)
        if done.samples or done.tier_rows or done.events:
            log.info(
                "retention (%s) deleted %d samples, %d tier rows and %d events",
                self._retention,
                done.samples,
                done.tier_rows,
                done.events,
            )

    def _measure(self) -> Space:
        return self._cap.measure(
            self._store.path, self._store.footprint.disk_bytes(), self._disk_usage
        )

    def _shed(self, space: Space) -> bool:
        """One step of shedding; False when nothing was left to shed."""
        what = self._store.retention.shed()
        if what is not None:
            log.warning(
                "the store takes %.0f%% of its limit: shed the oldest %s data",
                100 * space.ratio,
                what,
            )
        return what is not None

    def _report(self, space: Space) -> None:
        """The size as series of the collector's own, to detection."""
        values = np.array([space.ratio, space.used_bytes, space.limit_bytes], np.float64)
        batch = RecordBatch(
            COLLECTOR_SOURCE,
            0,
            _KEYS,
            np.arange(len(_KEYS), dtype=np.uint32),
            np.full(len(_KEYS), self._clock()),
            np.full(len(_KEYS), NO_STEP, np.int64),
            values,
            [],
        )
        self._feed([batch])


def store_limits(retention: str | None, max_store_bytes: str | None) -> tuple[Retention, DiskCap]:
    """The retention policy and the disk cap of the ``--retention`` and ``--max-store-bytes``
    options (None: the default); a mistake is a ValueError that names the option."""
    try:
        kept = DEFAULT_RETENTION if retention is None else Retention.parse(retention)
    except ValueError as exc:
        raise ValueError(f"--retention {retention}: {exc}") from None
    try:
        cap = DiskCap() if max_store_bytes is None else DiskCap.parse(max_store_bytes)
    except ValueError as exc:
        raise ValueError(f"--max-store-bytes {max_store_bytes}: {exc}") from None
    return kept, cap


def store_memory_limit(text: str) -> int:
    """Bytes of the ``--store-memory`` option: a size or a share of the machine's memory; a
    mistake is a ValueError that names the option."""
    try:
        return parse_size_or_share(text, psutil.virtual_memory().total, "the machine's memory")
    except ValueError as exc:
        raise ValueError(f"--store-memory {text}: {exc}") from None
