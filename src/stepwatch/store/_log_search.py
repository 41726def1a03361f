"""Log search: a bool query (``_log_query``) over the events table, with context lines.

Why a scan and no full-text index: measured on 10 M lines (bench/logs.py, docs/logs.md),
``contains(lower(text), word)`` over the column answers the source query about as fast as
DuckDB's fts extension, which must rebuild its whole index (minutes at that size) to see a
new line; a live collector appends all the time. Label and level tests first look for the
JSON text the store writes (a substring test) and parse JSON only for the lines that have it.

Why slices: lines are stored in eid order, which is about time order, so the newest lines
sit in the last row groups. The search reads the newest slice of eids first (the row groups'
min/max eid skip the rest) and reads on, in a slice sized by the matches found so far, only
while it has fewer than ``limit`` lines; once it has them, the rest of the table can hold
only lines newer than the last one kept, which the row groups' min/max time rule out
without reading them. So the newest 100 of frequent lines read a slice, not the table, and
a rare line costs one scan as before.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import duckdb

from .._log_query import LogQuery
from ._log_context import COLUMNS, LogHit, add_context, event_of

__all__ = ["FIRST_SLICE", "LogHit", "search_logs"]

#: The first slice the search reads, in events (about two row groups).
FIRST_SLICE = 1 << 18
#: The next slice holds this many times the events that the rate of matches so far says the
#: missing lines need, so that one more slice mostly suffices.
MARGIN = 2


def search_logs(
    cur: duckdb.DuckDBPyConnection,
    query: LogQuery,
    *,
    now: float,
    runs: Collection[str] | None,
    limit: int,
    context: int = 0,
    newest_first: bool = True,
    end_eid: int | None = None,
) -> list[LogHit]:
    """The first ``limit`` log lines matching ``query`` by time (newest first unless not
    ``newest_first``), each with up to ``context`` lines before and after it of the same run,
    node and rank. ``runs`` keeps only lines of those runs (a caller's projects); None: every
    line, of no run too. ``now`` resolves the query's date math. ``end_eid``: the eid after the
    last event, where the caller keeps it (else found by a scan of the eids)."""
    where, params = query.where(now)
    among = None if runs is None else sorted(runs)
    order = "DESC" if newest_first else "ASC"
    sql = f"""SELECT {COLUMNS} FROM events
        WHERE kind = 'log' AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], run))
          AND ({where}) AND {{part}}
        ORDER BY ts {order}, eid {order} LIMIT ?"""

    def read(part: str, bounds: list[object]) -> list[tuple[Any, ...]]:
        found = cur.execute(sql.format(part=part), [among, among, *params, *bounds, limit])
        return found.fetchall()

    if end_eid is not None:  # the slices below the first event are skipped by their min/max
        lo, hi = 0, end_eid
    else:
        span = cur.execute("SELECT min(eid), max(eid) + 1 FROM events").fetchone()
        lo, hi = (0, 0) if span is None or span[0] is None else (int(span[0]), int(span[1]))
    rows: list[tuple[Any, ...]] = []
    size, read_events = FIRST_SLICE, 0
    while lo < hi:
        if newest_first:
            part, hi = (max(lo, hi - size), hi), max(lo, hi - size)
        else:
            part, lo = (lo, min(hi, lo + size)), min(hi, lo + size)
        rows = _best(rows + read("eid >= ? AND eid < ?", list(part)), limit, newest_first)
        read_events += part[1] - part[0]
        if len(rows) == limit:
            if lo < hi:
                # The lines not read yet come first only if they are strictly newer (older)
                # than the last kept one: on equal times their eids put them after it.
                rest = "eid < ? AND ts > ?" if newest_first else "eid >= ? AND ts < ?"
                found = read(rest, [hi if newest_first else lo, rows[-1][0]])
                rows = _best(rows + found, limit, newest_first)
            break
        size = _next_size(read_events, len(rows), limit)
    hits = [LogHit(event_of(row), int(row[4])) for row in rows]
    if context > 0:
        add_context(cur, hits, context)
    return hits


def _next_size(read_events: int, found: int, limit: int) -> int:
    """Events to read next: ``MARGIN`` times what the lines missing need at the rate found so
    far; all the rest when none was found (a rare line: one scan, as without slices)."""
    if found == 0:
        return 1 << 62
    return max(FIRST_SLICE, math.ceil(MARGIN * (limit - found) * read_events / found))


def _best(rows: list[tuple[Any, ...]], limit: int, newest_first: bool) -> list[tuple[Any, ...]]:
    """The first ``limit`` rows in the search's order: by time, then eid."""
    rows.sort(key=lambda r: (r[0], r[4]), reverse=newest_first)
    return rows[:limit]
