"""Retention and shedding over an open store: moves its horizons (kept in the file, never
back) and deletes what lies behind them, a bounded chunk per transaction, remembering which
tables are already cut so that a pass with nothing due scans nothing."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import duckdb

from . import _prune
from ._plan import Kept
from ._prune import Pruned
from ._retention import Retention

__all__ = ["PRUNE_CHUNK", "Pruner", "StoreAccess"]

#: Rows deleted per retention transaction, so a pass never holds the writer for long.
PRUNE_CHUNK = 200_000

Txn = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]


@dataclass(frozen=True, slots=True)
class StoreAccess:
    """What pruning needs of the store: its write lock, transactions (``snapshot`` also gives
    the watermark as its transaction sees it), a plain cursor, the compaction watermark and
    its clock."""

    lock: threading.RLock
    txn: Txn
    snapshot: Callable[[], AbstractContextManager[tuple[duckdb.DuckDBPyConnection, int]]]
    cursor: Txn
    watermark: Callable[[], int]
    clock: Callable[[], float]


class Pruner:
    """``Store.retention``: what the store keeps, and the passes that keep it so."""

    def __init__(self, store: StoreAccess, newest: float) -> None:
        self._store = store
        #: The newest sample time ingested (never later than the clock): ages count from it.
        self.newest = newest
        self._cut_at: dict[str, tuple[float, int]] = {}  # where each table was last cut

    def heard(self, newest: float) -> None:
        """Samples up to ``newest`` were committed (a time still to come counts as now)."""
        self.newest = max(self.newest, min(newest, self._store.clock()))

    def retain(
        self,
        policy: Retention,
        chunk_rows: int = PRUNE_CHUNK,
        stop: Callable[[], bool] = lambda: False,
    ) -> Pruned:
        """Delete what ``policy`` keeps no longer (raw samples only once rolled up), at most
        ``chunk_rows`` rows per transaction, until done or ``stop()`` (the next call goes on);
        horizons moved by ``shed`` stay where they are.

        Ages count back from the newest sample ingested, never from a time later than now: a
        store that takes no new data (a collector that was down, old runs looked at again)
        loses nothing by being opened."""
        if not math.isfinite(self.newest):
            return Pruned()
        return self._prune(policy.cutoffs(self.newest), chunk_rows, stop)

    def shed(self, chunk_rows: int = PRUNE_CHUNK) -> str | None:
        """Make room: delete the oldest tenth of the first of ``SHED_ORDER`` that has rows to
        give; what was shed ("raw", "10s", "events"), or None when nothing can go."""
        store = self._store
        with store.snapshot() as (cur, watermark):
            kept, target = _prune.read_kept(cur), _prune.shed_target(cur, watermark, store.clock())
        if target is None:
            return None
        self._prune(_prune.moved(kept, *target), chunk_rows)
        with store.lock, store.cursor() as cur, contextlib.suppress(duckdb.Error):
            cur.execute("CHECKPOINT")  # freed blocks count as free (else at DuckDB's own)
        return target[0]

    def kept(self) -> Kept:
        """Where each kind of data begins now (what retention and shedding left)."""
        with self._store.txn() as cur:
            return _prune.read_kept(cur)

    def _prune(
        self, target: Kept, chunk_rows: int, stop: Callable[[], bool] = lambda: False
    ) -> Pruned:
        """Move the horizons to ``target`` (never back) in one transaction, then delete what
        lies behind them, a chunk per transaction. A table already cut at its horizon is left
        alone until the horizon moves (every 5 minutes of data under steady ingest), raw
        samples until compaction moves on as well: tier rows and events that land behind a
        horizon meanwhile (of late samples) go with its next move."""
        store = self._store
        with store.lock, store.txn() as cur:
            stored = _prune.read_kept(cur)
            kept = stored.at_least(target)
            newest = float(math.floor(self.newest)) if math.isfinite(self.newest) else None
            if kept != stored or newest not in (None, _prune.read_newest(cur)):
                _prune.write_kept(cur, kept, self.newest)  # the file keeps whole seconds
        done = Pruned()
        for cut in _prune.cuts(kept):
            at = (cut.horizon, store.watermark() if cut.what == "raw" else 0)
            deleted = chunk_rows if self._cut_at.get(cut.table) != at else 0
            while deleted >= chunk_rows and not stop():
                with store.lock, store.txn() as cur:
                    at = (cut.horizon, store.watermark() if cut.what == "raw" else 0)
                    deleted = _prune.delete_chunk(cur, cut, at[1], chunk_rows)
                done.add(cut.what, deleted)
                if deleted < chunk_rows:
                    self._cut_at[cut.table] = at
        return done
