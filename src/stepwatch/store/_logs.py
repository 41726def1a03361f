"""Log events filtered in SQL: text search, node, rank, level and time."""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb

from ..model import Event


@dataclass(frozen=True, slots=True)
class LogFilter:
    """Which log lines to return; None leaves a field unfiltered."""

    run: str | None = None
    #: Only lines of these runs (a caller's projects); None: of every run and of none.
    runs: frozenset[str] | None = None
    text: str | None = None
    node: str | None = None
    rank: str | None = None
    level: str | None = None
    start: float | None = None
    end: float | None = None
    limit: int = 500


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def logs(cur: duckdb.DuckDBPyConnection, f: LogFilter) -> list[Event]:
    """The newest ``f.limit`` log events that pass the filter, oldest first.

    ``text`` matches case-insensitively anywhere in the line (a traceback's
    whole text); ``level`` compares with the level the tailer detected.
    """
    pattern = None if f.text is None else f"%{_escape_like(f.text)}%"
    level = None if f.level is None else f.level.lower()
    among = None if f.runs is None else sorted(f.runs)
    rows = cur.execute(
        r"""SELECT ts, kind, text, labels, data FROM events
        WHERE kind = 'log' AND (? IS NULL OR run = ?)
          AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], run))
          AND (? IS NULL OR text ILIKE ? ESCAPE '\')
          AND (? IS NULL OR json_extract_string(labels, '$.node') = ?)
          AND (? IS NULL OR json_extract_string(labels, '$.rank') = ?)
          AND (? IS NULL OR lower(json_extract_string(data, '$.level')) = ?)
          AND (? IS NULL OR ts >= ?) AND (? IS NULL OR ts <= ?)
        ORDER BY ts DESC, rowid DESC LIMIT ?""",
        [
            *(f.run, f.run, among, among, pattern, pattern, f.node, f.node, f.rank, f.rank),
            *(level, level),
            *(f.start, f.start, f.end, f.end, f.limit),
        ],
    ).fetchall()
    return [
        Event(ts, kind, text, json.loads(labels), json.loads(data))
        for ts, kind, text, labels, data in reversed(rows)
    ]
