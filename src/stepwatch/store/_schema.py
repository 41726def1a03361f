"""Tables of the store file and the constants that fix their meaning.

Rollup and histogram tiers are part of the file format: a query can only merge
partial aggregates whose buckets nest, so every coarser tier is a multiple of
the finer ones, and changing them needs a new schema version.
"""

from __future__ import annotations

import math

import duckdb

from . import _state, _tokens
from ._errors import StoreError

#: 2: the collector's records apart from ingested events, hash-chained; sources' owners.
#: 3: ingested events numbered (``eid``); the checkpoints of the collector's state.
SCHEMA_VERSION = 3

#: Widths in seconds of the pre-aggregated tiers, finest first; each divides the next.
TIERS: tuple[int, ...] = (10, 300)

#: Histogram bins grow by this factor, so a bin's centre is within 1% of every value in it.
GAMMA = 1.02
LN_GAMMA = math.log(GAMMA)

#: Added to the log-bin index so that every finite non-zero magnitude gets a positive index.
BIN_OFFSET = 40_000

_DDL = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value BIGINT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS series (
        id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, name VARCHAR NOT NULL,
        run VARCHAR, node VARCHAR, rank VARCHAR, gpu VARCHAR, labels VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS samples (
        rid BIGINT NOT NULL, series INTEGER NOT NULL, ts DOUBLE NOT NULL,
        step BIGINT, value DOUBLE)""",
    "CREATE TABLE IF NOT EXISTS sources (source VARCHAR PRIMARY KEY, seq BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS source_owners (source VARCHAR PRIMARY KEY, owner VARCHAR NOT NULL)",
    """CREATE TABLE IF NOT EXISTS events (
        ts DOUBLE NOT NULL, kind VARCHAR NOT NULL, text VARCHAR NOT NULL, run VARCHAR,
        labels VARCHAR NOT NULL, data VARCHAR NOT NULL, eid BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS records (
        seq BIGINT NOT NULL, ts DOUBLE NOT NULL, kind VARCHAR NOT NULL, text VARCHAR NOT NULL,
        run VARCHAR, labels VARCHAR NOT NULL, data VARCHAR NOT NULL, prev VARCHAR NOT NULL,
        hash VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS runs (
        id VARCHAR PRIMARY KEY, project VARCHAR NOT NULL, name VARCHAR NOT NULL,
        config VARCHAR NOT NULL, status VARCHAR NOT NULL, start DOUBLE NOT NULL, "end" DOUBLE,
        labels VARCHAR NOT NULL, planned_total_steps BIGINT)""",
    _tokens.DDL,
    *_state.DDL,
    """CREATE TABLE IF NOT EXISTS checkpoints (
        name VARCHAR PRIMARY KEY, version VARCHAR NOT NULL, blob BLOB NOT NULL,
        rid BIGINT NOT NULL, eid BIGINT NOT NULL)""",
]
for _tier in TIERS:
    _DDL.append(
        f"""CREATE TABLE IF NOT EXISTS rollup_{_tier} (
        series INTEGER NOT NULL, b BIGINT NOT NULL, mn DOUBLE, mx DOUBLE, n BIGINT NOT NULL,
        last_ts DOUBLE NOT NULL, last_rid BIGINT NOT NULL, last_value DOUBLE, last_step BIGINT)"""
    )
    _DDL.append(
        f"""CREATE TABLE IF NOT EXISTS hist_{_tier} (
        grp INTEGER NOT NULL, b BIGINT NOT NULL, bin INTEGER NOT NULL, n BIGINT NOT NULL)"""
    )


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables of a new file, or check that an existing file speaks our version
    (before changing anything in it)."""
    con.execute("BEGIN")
    try:
        _check_version(con)
        for statement in _DDL:
            con.execute(statement)
        con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", [SCHEMA_VERSION])
        con.execute("INSERT OR IGNORE INTO meta VALUES ('watermark', 0)")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _check_version(con: duckdb.DuckDBPyConnection) -> None:
    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "meta" not in tables:
        return
    found = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchall()
    version = found[0][0] if found else None
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"file has store schema version {version}, this code reads {SCHEMA_VERSION}"
        )


def bin_sql(col: str) -> str:
    """SQL for the signed log-bin of a finite value; 0 gets bin 0, which sorts between the signs."""
    return (
        f"CASE WHEN {col} = 0 THEN 0 ELSE (sign({col}) * "
        f"(round(ln(abs({col})) / {LN_GAMMA!r}) + {BIN_OFFSET}))::INTEGER END"
    )


def tier_sql(ts: str, tier: int) -> str:
    """SQL for a timestamp's bucket in a tier, via the finest tier so that tiers nest exactly."""
    fine = f"floor({ts} / {TIERS[0]})"
    return fine if tier == TIERS[0] else f"floor({fine} / {tier // TIERS[0]})"
