"""Profiler traces uploaded by training processes, kept with their run, rank and steps.

A trace is kept as it came (gzip-compressed Chrome/Kineto JSON), a few per run and a bounded
total: the newest are kept, the oldest go first, so profiling on every regression cannot fill
the disk.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import Any

import duckdb

__all__ = ["MAX_PROFILE_BYTES", "ProfileInfo", "Profiles"]

Txn = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]

#: Step 8 of the schema.
DDL = """CREATE TABLE profiles (
    id VARCHAR PRIMARY KEY, run VARCHAR NOT NULL, rank VARCHAR, first_step BIGINT,
    steps INTEGER NOT NULL, ts DOUBLE NOT NULL, bytes BIGINT NOT NULL, trace BLOB NOT NULL)"""
#: Traces kept per run (the newest) and in all (bytes, the oldest dropped first).
PER_RUN = 20
MAX_TOTAL_BYTES = 1 << 30
#: The largest trace taken.
MAX_PROFILE_BYTES = 256 << 20
_COLUMNS = "id, run, rank, first_step, steps, ts, bytes"


@dataclass(frozen=True, slots=True)
class ProfileInfo:
    """A kept trace without its bytes: what a list shows."""

    id: str
    run: str
    rank: str | None
    first_step: int | None
    steps: int
    ts: float
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Profiles:
    """The profiles table, written under the store's writer ``lock``."""

    def __init__(
        self,
        lock: threading.RLock,
        txn: Txn,
        per_run: int = PER_RUN,
        max_total_bytes: int = MAX_TOTAL_BYTES,
    ) -> None:
        self._lock, self._txn = lock, txn
        self._per_run, self._max_total = per_run, max_total_bytes

    def put(
        self,
        run: str,
        rank: str | None,
        first_step: int | None,
        steps: int,
        ts: float,
        trace: bytes,
    ) -> ProfileInfo:
        """Keep a trace; drop the run's oldest beyond ``per_run`` and the oldest of all beyond
        the total bytes."""
        info = ProfileInfo(uuid.uuid4().hex[:16], run, rank, first_step, steps, ts, len(trace))
        with self._lock, self._txn() as cur:
            cur.execute(
                f"INSERT INTO profiles ({_COLUMNS}, trace) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [*asdict(info).values(), trace],
            )
            cur.execute(
                """DELETE FROM profiles WHERE id IN (SELECT id FROM (SELECT id, row_number()
                OVER (ORDER BY ts DESC, id) AS n FROM profiles WHERE run = ?) WHERE n > ?)""",
                [run, self._per_run],
            )
            cur.execute(
                """DELETE FROM profiles WHERE id IN (SELECT id FROM (SELECT id, sum(bytes)
                OVER (ORDER BY ts DESC, id) AS total FROM profiles) WHERE total > ?)""",
                [self._max_total],
            )
        return info

    def of_run(self, run: str) -> list[ProfileInfo]:
        """The run's traces, newest first."""
        with self._txn() as cur:
            rows = cur.execute(
                f"SELECT {_COLUMNS} FROM profiles WHERE run = ? ORDER BY ts DESC, id", [run]
            ).fetchall()
        return [ProfileInfo(*row) for row in rows]

    def trace(self, run: str, profile_id: str) -> bytes | None:
        """A trace's bytes (gzip-compressed JSON), or None when the run has no such trace."""
        with self._txn() as cur:
            row = cur.execute(
                "SELECT trace FROM profiles WHERE run = ? AND id = ?", [run, profile_id]
            ).fetchone()
        return None if row is None else bytes(row[0])
