"""The store file's schema: the constants that fix its tables' meaning, and the steps that
built it, each from the version before it.

Rollup and histogram tiers are part of the file format: a query can only merge
partial aggregates whose buckets nest, so every coarser tier is a multiple of
the finer ones, and changing them needs a new schema version.

A new file runs every step; a file of an older version runs the steps it lacks, one
transaction each, so a failure leaves it whole at the last version it reached. A step is
history: once released it never changes, and a change of any table is a new step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import duckdb

from . import _alert_state, _analyses, _forecasts, _profiles, _state, _tokens
from ._errors import StoreError

#: Widths in seconds of the pre-aggregated tiers, finest first; each divides the next.
TIERS: tuple[int, ...] = (10, 300)

#: Histogram bins grow by this factor, so a bin's centre is within 1% of every value in it.
GAMMA = 1.02
LN_GAMMA = math.log(GAMMA)

#: Added to the log-bin index so that every finite non-zero magnitude gets a positive index.
BIN_OFFSET = 40_000

Step = Callable[[duckdb.DuckDBPyConnection], None]

_V1_TABLES = (
    "CREATE TABLE meta (key VARCHAR PRIMARY KEY, value BIGINT NOT NULL)",
    """CREATE TABLE series (
        id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, name VARCHAR NOT NULL,
        run VARCHAR, node VARCHAR, rank VARCHAR, gpu VARCHAR, labels VARCHAR NOT NULL)""",
    """CREATE TABLE samples (
        rid BIGINT NOT NULL, series INTEGER NOT NULL, ts DOUBLE NOT NULL,
        step BIGINT, value DOUBLE)""",
    "CREATE TABLE sources (source VARCHAR PRIMARY KEY, seq BIGINT NOT NULL)",
    """CREATE TABLE events (
        ts DOUBLE NOT NULL, kind VARCHAR NOT NULL, text VARCHAR NOT NULL, run VARCHAR,
        labels VARCHAR NOT NULL, data VARCHAR NOT NULL)""",
    """CREATE TABLE runs (
        id VARCHAR PRIMARY KEY, project VARCHAR NOT NULL, name VARCHAR NOT NULL,
        config VARCHAR NOT NULL, status VARCHAR NOT NULL, start DOUBLE NOT NULL, "end" DOUBLE,
        labels VARCHAR NOT NULL, planned_total_steps BIGINT)""",
    _tokens.DDL,
)


def _v1(con: duckdb.DuckDBPyConnection) -> None:
    """Samples, their series, runs, events, tokens and the pre-aggregated tiers."""
    for statement in _V1_TABLES:
        con.execute(statement)
    for tier in TIERS:
        con.execute(
            f"""CREATE TABLE rollup_{tier} (
            series INTEGER NOT NULL, b BIGINT NOT NULL, mn DOUBLE, mx DOUBLE, n BIGINT NOT NULL,
            last_ts DOUBLE NOT NULL, last_rid BIGINT NOT NULL, last_value DOUBLE,
            last_step BIGINT)"""
        )
        con.execute(
            f"""CREATE TABLE hist_{tier} (
            grp INTEGER NOT NULL, b BIGINT NOT NULL, bin INTEGER NOT NULL, n BIGINT NOT NULL)"""
        )
    con.execute("INSERT INTO meta VALUES ('schema', 0), ('watermark', 0)")


def _v2(con: duckdb.DuckDBPyConnection) -> None:
    """The collector's records apart from ingested events, hash-chained; sources' owners."""
    con.execute(
        """CREATE TABLE records (
        seq BIGINT NOT NULL, ts DOUBLE NOT NULL, kind VARCHAR NOT NULL, text VARCHAR NOT NULL,
        run VARCHAR, labels VARCHAR NOT NULL, data VARCHAR NOT NULL, prev VARCHAR NOT NULL,
        hash VARCHAR NOT NULL)"""
    )
    con.execute("CREATE TABLE source_owners (source VARCHAR PRIMARY KEY, owner VARCHAR NOT NULL)")


def _v3(con: duckdb.DuckDBPyConnection) -> None:
    """The current state of alerts, silences, commands and actions as tables, kept by each
    records write (an older file's are folded from all its records once, here); ingested
    events numbered (``eid``, in the order they were stored); the checkpoints of the
    collector's state."""
    for statement in _state.DDL:
        con.execute(statement)
    con.execute(
        """CREATE TABLE checkpoints (
        name VARCHAR PRIMARY KEY, version VARCHAR NOT NULL, blob BLOB NOT NULL,
        rid BIGINT NOT NULL, eid BIGINT NOT NULL)"""
    )
    _state.rebuild(con)
    con.execute(  # a table of its own: DuckDB takes no update and new index in one transaction
        """CREATE TABLE events_v3 (
        ts DOUBLE NOT NULL, kind VARCHAR NOT NULL, text VARCHAR NOT NULL, run VARCHAR,
        labels VARCHAR NOT NULL, data VARCHAR NOT NULL, eid BIGINT NOT NULL)"""
    )
    con.execute(
        "INSERT INTO events_v3 SELECT *, row_number() OVER (ORDER BY rowid) - 1 FROM events"
    )
    con.execute("DROP TABLE events")
    con.execute("ALTER TABLE events_v3 RENAME TO events")


def _v4(con: duckdb.DuckDBPyConnection) -> None:
    """An index of alerts by run: a run's list costs the same after a million alerts."""
    con.execute(_alert_state.RUN_INDEX)


def _v5(con: duckdb.DuckDBPyConnection) -> None:
    """An index of series by run: the catalogue reads a run's series back from the table
    rather than holding every series ever stored in memory."""
    con.execute("CREATE INDEX series_run ON series (run)")


def _v6(con: duckdb.DuckDBPyConnection) -> None:
    """The forecast kept of each run, one row a run: the runs list reads it."""
    con.execute(_forecasts.DDL)


def _v7(con: duckdb.DuckDBPyConnection) -> None:
    """The loss law of each project's finished runs, one row a project: forecasts read it."""
    con.execute(_forecasts.LAWS_DDL)


def _v8(con: duckdb.DuckDBPyConnection) -> None:
    """Profiler traces uploaded by training processes, with their run, rank and steps."""
    con.execute(_profiles.DDL)


def _v9(con: duckdb.DuckDBPyConnection) -> None:
    """What the analyst model said of each incident, one row an incident."""
    con.execute(_analyses.DDL)


#: Step ``n`` (from 1) takes a file from version ``n - 1`` to ``n``; append, never edit.
STEPS: tuple[Step, ...] = (_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9)

#: The version this code reads and writes: the number of steps.
SCHEMA_VERSION = len(STEPS)


def version(con: duckdb.DuckDBPyConnection) -> int:
    """The schema version of the open file: 0 for an empty one."""
    tables = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
    ).fetchall()
    if not tables:
        return 0
    found = []
    if ("meta",) in tables:
        found = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchall()
    if not found:
        raise StoreError("file has tables but no store schema version: not a stepwatch store")
    return int(found[0][0])


def upgrade(
    con: duckdb.DuckDBPyConnection, to: int = SCHEMA_VERSION, steps: Sequence[Step] = STEPS
) -> tuple[int, int]:
    """Run the steps the file lacks up to version ``to``, each in its own transaction;
    returns the versions before and after. A file newer than ``to`` is refused untouched."""
    start = version(con)
    if start > to:
        raise StoreError(
            f"file has store schema version {start}, this code reads {to}: "
            "open it with a newer stepwatch"
        )
    for number in range(start + 1, to + 1):
        con.execute("BEGIN")
        try:
            steps[number - 1](con)
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema'", [number])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return start, to


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
