"""Cutting old data out of the store: horizons kept in ``meta``, deletes in bounded chunks.

A horizon moves forward in its own transaction before any row behind it is deleted, so a
query that reads it never counts on raw samples that a chunk is about to take: tier rows,
complete below the compaction watermark, answer that stretch from the first chunk on. Raw
samples above the watermark are never deleted (their rollups do not exist yet).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import duckdb

from ..model import RecordBatch, SampleBatch
from ._plan import Kept
from ._schema import TIERS

__all__ = [
    "SHED_ORDER",
    "Cut",
    "Pruned",
    "cuts",
    "delete_chunk",
    "moved",
    "newest_ingested",
    "read_kept",
    "read_newest",
    "shed_target",
    "used_bytes",
    "write_kept",
]

_RAW, _EVENTS, _NEWEST = "kept_raw", "kept_events", "newest_ts"
_TIER_KEYS = tuple(f"kept_{t}" for t in TIERS)
_ALIGN = TIERS[-1]
#: What shedding gives up first: raw samples, then every tier but the coarsest, then events.
SHED_ORDER = ("raw", *(f"{t}s" for t in TIERS[:-1]), "events")


@dataclass(frozen=True, slots=True)
class Cut:
    """One table's deletion: the rows ``where`` selects (``?``: the horizon, the watermark)."""

    what: str
    table: str
    where: str
    horizon: float


@dataclass(slots=True)
class Pruned:
    """Rows deleted, per kind of data, and the biggest chunk one transaction deleted."""

    samples: int = 0
    tier_rows: int = 0
    events: int = 0
    largest_chunk: int = 0

    def add(self, what: str, rows: int) -> None:
        if what == "raw":
            self.samples += rows
        elif what == "events":
            self.events += rows
        else:
            self.tier_rows += rows
        self.largest_chunk = max(self.largest_chunk, rows)


def read_kept(cur: duckdb.DuckDBPyConnection) -> Kept:
    """The horizons the file holds (none yet: nothing was deleted)."""
    stored = dict(cur.execute("SELECT key, value FROM meta WHERE key LIKE 'kept_%'").fetchall())

    def at(key: str) -> float:
        return float(stored[key]) if key in stored else -math.inf

    return Kept(at(_RAW), tuple(at(k) for k in _TIER_KEYS), at(_EVENTS))


def read_newest(cur: duckdb.DuckDBPyConnection) -> float:
    """The newest ingested sample's time the last retention pass saw (-inf: none yet)."""
    found = cur.execute("SELECT value FROM meta WHERE key = ?", [_NEWEST]).fetchall()
    return float(found[0][0]) if found else -math.inf


def newest_ingested(batches: Sequence[SampleBatch], accepted: Sequence[bool]) -> float:
    """The latest sample time of the applied batches that are not the collector's own."""
    ts = [
        float(b.ts.max())
        for b, ok in zip(batches, accepted, strict=True)
        if ok and len(b) and not isinstance(b, RecordBatch)
    ]
    return max(ts, default=-math.inf)


def write_kept(cur: duckdb.DuckDBPyConnection, kept: Kept, newest: float) -> None:
    """Store the horizons that are set (each a whole number of seconds), and ``newest``."""
    pairs = [
        (_RAW, kept.raw),
        *zip(_TIER_KEYS, kept.tiers, strict=True),
        (_EVENTS, kept.events),
        (_NEWEST, newest),
    ]
    cur.executemany(
        "INSERT OR REPLACE INTO meta VALUES (?, ?)",
        [[key, int(value)] for key, value in pairs if math.isfinite(value)],
    )


def moved(kept: Kept, what: str, horizon: float) -> Kept:
    """``kept`` with the horizon of ``what`` ("raw", "10s", "events"...) at ``horizon``."""
    if what == "raw":
        return replace(kept, raw=horizon)
    if what == "events":
        return replace(kept, events=horizon)
    tier = TIERS.index(int(what.removesuffix("s")))
    return replace(kept, tiers=(*kept.tiers[:tier], horizon, *kept.tiers[tier + 1 :]))


def cuts(kept: Kept) -> Iterator[Cut]:
    """Every table's deletion up to its horizon: raw first, the coarsest tier last."""
    if math.isfinite(kept.raw):
        yield Cut("raw", "samples", "ts < ? AND rid < ?", kept.raw)
    for tier, horizon in zip(TIERS, kept.tiers, strict=True):
        if math.isfinite(horizon):
            for table in (f"rollup_{tier}", f"hist_{tier}"):
                yield Cut(f"{tier}s", table, f"b < ? / {tier}", horizon)
    if math.isfinite(kept.events):
        yield Cut("events", "events", "ts < ?", kept.events)


def delete_chunk(cur: duckdb.DuckDBPyConnection, cut: Cut, watermark: int, limit: int) -> int:
    """Delete at most ``limit`` rows of one cut; the number deleted."""
    params: list[object] = [cut.horizon, watermark] if cut.what == "raw" else [cut.horizon]
    ((deleted,),) = cur.execute(
        f"""DELETE FROM {cut.table} WHERE rowid IN (
            SELECT rowid FROM {cut.table} WHERE {cut.where} LIMIT {int(limit)})""",
        params,
    ).fetchall()
    return int(deleted)


def _oldest(cur: duckdb.DuckDBPyConnection, what: str, watermark: int) -> float | None:
    """When the oldest row that shedding could delete lies: compacted raw samples, the rows of
    a tier ("10s"), events; None when there is none."""
    if what == "raw":
        sql, params = "SELECT min(ts) FROM samples WHERE rid < ?", [watermark]
    elif what == "events":
        sql, params = "SELECT min(ts) FROM events", []
    else:
        tier = int(what.removesuffix("s"))
        sql, params = f"SELECT min(b) * {tier} FROM rollup_{tier}", []
    ((found,),) = cur.execute(sql, params).fetchall()
    return None if found is None else float(found)


def shed_target(
    cur: duckdb.DuckDBPyConnection, watermark: int, now: float
) -> tuple[str, float] | None:
    """What to shed next, in ``SHED_ORDER``, and its new horizon; None when nothing can go."""
    for what in SHED_ORDER:
        found = _oldest(cur, what, watermark)
        horizon = None if found is None else _shed_horizon(found, now)
        if horizon is not None:
            return what, horizon
    return None


def used_bytes(cur: duckdb.DuckDBPyConnection) -> int:
    """The bytes of the blocks in use in the cursor's database file (DuckDB's own count)."""
    ((used,),) = cur.execute(
        "SELECT block_size * used_blocks FROM pragma_database_size() "
        "WHERE database_name = current_database()"
    ).fetchall()
    return int(used)


def _shed_horizon(found: float, now: float) -> float | None:
    """A horizon a tenth of the way from the oldest row to now (whole coarse buckets, at least
    one past that row); None when that would cut into the bucket still filling."""
    step = max(_ALIGN, (now - found) / 10)
    horizon = math.ceil((found + step) / _ALIGN) * _ALIGN
    if horizon > math.floor(now / _ALIGN) * _ALIGN:
        return None
    return float(horizon)
