"""Log search: a bool query (``_log_query``) over the events table, with context lines.

Why a scan and no full-text index: measured on 10 M lines (bench/logs.py, docs/logs.md),
``contains(lower(text), word)`` over the column answers the source query about as fast as
DuckDB's fts extension, which must rebuild its whole index (minutes at that size) to see a
new line; a live collector appends all the time. Label and level tests first look for the
JSON text the store writes (a substring test) and parse JSON only for the lines that have it.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field

import duckdb

from .._log_query import LogQuery
from ..model import Event

__all__ = ["CONTEXT_SPAN_S", "LogHit", "search_logs"]

#: Context comes from this many seconds either side of a hit: the bound keeps its cost to the
#: few row groups of that time (their min/max ts skip the rest).
CONTEXT_SPAN_S = 300.0

_COLUMNS = "ts, text, labels, data, eid"


@dataclass(slots=True)
class LogHit:
    """A matching line, its number in the store, and the lines of its stream around it."""

    event: Event
    eid: int
    before: list[Event] = field(default_factory=list)
    after: list[Event] = field(default_factory=list)


def _event(row: tuple[object, ...]) -> Event:
    ts, text, labels, data = row[:4]
    return Event(float(ts), "log", str(text), json.loads(str(labels)), json.loads(str(data)))  # type: ignore[arg-type]


def search_logs(
    cur: duckdb.DuckDBPyConnection,
    query: LogQuery,
    *,
    now: float,
    runs: Collection[str] | None,
    limit: int,
    context: int = 0,
    newest_first: bool = True,
) -> list[LogHit]:
    """The first ``limit`` log lines matching ``query`` by time (newest first unless not
    ``newest_first``), each with up to ``context`` lines before and after it of the same run,
    node and rank. ``runs`` keeps only lines of those runs (a caller's projects); None: every
    line, of no run too. ``now`` resolves the query's date math."""
    where, params = query.where(now)
    among = None if runs is None else sorted(runs)
    order = "DESC" if newest_first else "ASC"
    rows = cur.execute(
        f"""SELECT {_COLUMNS}, run FROM events
        WHERE kind = 'log' AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], run))
          AND ({where})
        ORDER BY ts {order}, eid {order} LIMIT ?""",
        [among, among, *params, limit],
    ).fetchall()
    hits = [LogHit(_event(row), int(row[4])) for row in rows]
    if context > 0:
        for hit, row in zip(hits, rows, strict=True):
            _add_context(cur, hit, row[5], context)
    return hits


def _same_label(name: str, value: str | None, params: list[object]) -> str:
    """SQL: the line's label ``name`` is ``value`` (absent when None)."""
    path = f'$."{name}"'
    if value is None:
        params.append(path)
        return "json_extract_string(labels, ?) IS NULL"
    needle = f"{json.dumps(name)}: {json.dumps(value)}"
    params.extend([needle, path, value])
    return "contains(labels, ?) AND json_extract_string(labels, ?) = ?"


def _add_context(cur: duckdb.DuckDBPyConnection, hit: LogHit, run: str | None, n: int) -> None:
    """Fill ``hit.before`` and ``hit.after``: the ``n`` nearest lines of its stream each side."""
    params: list[object] = [hit.event.ts - CONTEXT_SPAN_S, hit.event.ts + CONTEXT_SPAN_S, run]
    conditions = [
        "kind = 'log'",
        "ts BETWEEN ? AND ?",
        "run IS NOT DISTINCT FROM ?",
        _same_label("node", hit.event.labels.get("node"), params),
        _same_label("rank", hit.event.labels.get("rank"), params),
    ]
    stream = " AND ".join(conditions)
    ts, eid = hit.event.ts, hit.eid
    rows = cur.execute(
        f"""(SELECT {_COLUMNS}, 0 AS side FROM events
            WHERE {stream} AND (ts < ? OR (ts = ? AND eid < ?))
            ORDER BY ts DESC, eid DESC LIMIT ?)
        UNION ALL
        (SELECT {_COLUMNS}, 1 AS side FROM events
            WHERE {stream} AND (ts > ? OR (ts = ? AND eid > ?))
            ORDER BY ts, eid LIMIT ?)""",
        [*params, ts, ts, eid, n, *params, ts, ts, eid, n],
    ).fetchall()
    rows.sort(key=lambda r: (r[0], r[4]))
    hit.before = [_event(r) for r in rows if r[5] == 0]
    hit.after = [_event(r) for r in rows if r[5] == 1]
