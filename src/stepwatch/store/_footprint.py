"""What the store takes on disk and in memory, and writing its log into the file: the
figures upkeep and /metrics read, apart from the store's reads and writes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import duckdb

from . import _prune
from ._space import wal_path

__all__ = ["Footprint"]

Cursor = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]


class Footprint:
    """The size of the store file ``path`` and DuckDB's memory for it."""

    def __init__(self, path: Path, lock: threading.RLock, txn: Cursor, cursor: Cursor) -> None:
        self._path, self._lock, self._txn, self._cursor = path, lock, txn, cursor

    def disk_bytes(self) -> int:
        """Its blocks in use plus its write-ahead log, without a scan (blocks freed by
        deletes are reused before the file grows)."""
        with self._txn() as cur:
            used = _prune.used_bytes(cur)
        wal = wal_path(self._path)
        return used + (wal.stat().st_size if wal.exists() else 0)

    def checkpoint(self) -> bool:
        """Write what the log holds into the file, if it holds anything; True when it did.

        DuckDB's own checkpoint (past 16 MiB of log) and a plain ``CHECKPOINT`` give up while
        another transaction is open, which in a collector (readers on every thread) is nearly
        always: the rows written since then, their indexes and row versions stay in memory,
        a little more every run. ``FORCE`` waits for the open transactions to end (DuckDB
        1.4 on; before, it aborted them) and holds new ones back for the checkpoint's time.
        """
        wal = wal_path(self._path)
        if not wal.exists() or not wal.stat().st_size:
            return False
        with self._lock, self._cursor() as cur:
            cur.execute("FORCE CHECKPOINT")
        return True

    def memory_bytes(self) -> int:
        """Cached blocks, indexes, rows not yet checkpointed."""
        with self._cursor() as cur:
            ((used,),) = cur.execute(
                "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()"
            ).fetchall()
        return int(used)
