"""Runs and events as rows: the mapping between model objects and their tables."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import duckdb

from ..model import Event, Run

_RUN_COLUMNS = 'id, project, name, config, status, start, "end", labels, planned_total_steps'


def _run(row: tuple[Any, ...]) -> Run:
    rid, project, name, config, status, start, end, labels, planned = row
    return Run(
        rid, project, name, json.loads(config), status, start, end, json.loads(labels), planned
    )


def upsert_run(cur: duckdb.DuckDBPyConnection, run: Run) -> None:
    """Insert the run, or replace the stored one with the same id."""
    cur.execute(
        f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run.id,
            run.project,
            run.name,
            json.dumps(run.config, sort_keys=True),
            run.status,
            float(run.start),
            None if run.end is None else float(run.end),
            json.dumps(run.labels, sort_keys=True),
            run.planned_total_steps,
        ],
    )


def get_run(cur: duckdb.DuckDBPyConnection, run_id: str) -> Run | None:
    """The run with this id, if stored."""
    rows = cur.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", [run_id]).fetchall()
    return _run(rows[0]) if rows else None


def list_runs(
    cur: duckdb.DuckDBPyConnection,
    project: str | None,
    status: str | None,
    run: str | None = None,
    projects: Collection[str] | None = None,
    limit: int | None = None,
) -> list[Run]:
    """Runs of a project and/or status (one run; only of ``projects``), newest start first
    (the first ``limit`` of them)."""
    among = None if projects is None else sorted(projects)
    rows = cur.execute(
        f"""SELECT {_RUN_COLUMNS} FROM runs
        WHERE (? IS NULL OR project = ?) AND (? IS NULL OR status = ?) AND (? IS NULL OR id = ?)
          AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], project))
        ORDER BY start DESC, id{"" if limit is None else f" LIMIT {int(limit)}"}""",
        [project, project, status, status, run, run, among, among],
    ).fetchall()
    return [_run(r) for r in rows]


#: How each table of events orders them: ingested ones by time, the collector's in write order.
_ORDER = {"events": "ts DESC, rowid DESC", "records": "seq DESC"}


def events(
    cur: duckdb.DuckDBPyConnection,
    run: str | None,
    kind: str | None,
    start: float | None,
    end: float | None,
    limit: int,
    runs: Collection[str] | None = None,
    table: str = "events",
) -> list[Event]:
    """The newest ``limit`` matching events of ``table`` (``events``, or the collector's
    ``records``), returned oldest first; ``runs`` keeps only those of these runs."""
    among = None if runs is None else sorted(runs)
    rows = cur.execute(
        f"""SELECT ts, kind, text, labels, data FROM {table}
        WHERE (? IS NULL OR run = ?) AND (? IS NULL OR kind = ?)
          AND (? IS NULL OR ts >= ?) AND (? IS NULL OR ts <= ?)
          AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], run))
        ORDER BY {_ORDER[table]} LIMIT ?""",
        [run, run, kind, kind, start, start, end, end, among, among, limit],
    ).fetchall()
    return [
        Event(ts, kind, text, json.loads(labels), json.loads(data))
        for ts, kind, text, labels, data in reversed(rows)
    ]
