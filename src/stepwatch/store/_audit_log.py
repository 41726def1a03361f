"""Reading the newest audit records without reading them all: the records table is written in
seq order, so a window of seqs below the head is a few row groups (zone maps skip the rest);
the window widens only while it holds fewer matches than the page needs."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass

import duckdb

from ..model import Event
from ._paging import Page, Where, decode_cursor, encode_cursor

__all__ = ["AuditQuery"]

#: The first window holds this many records per item of the page; each next one four times more.
_SPAN = 8


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which audit records a list wants; None is no filter (``projects`` as in ``AlertQuery``;
    records of no run are for identities of every project)."""

    run: str | None = None
    action: str | None = None
    kind: str | None = None
    since: float | None = None
    projects: Collection[str] | None = None

    def where(self) -> Where:
        where = Where().add("kind = 'audit'").eq("run", self.run).projects("run", self.projects)
        where.eq("json_extract_string(data, '$.action')", self.action)
        where.eq("json_extract_string(data, '$.kind')", self.kind)
        return where if self.since is None else where.add("ts >= ?", self.since)


def _seq(cursor: str) -> int:
    key = decode_cursor(cursor)[1]
    if not key.isdigit():
        raise ValueError(f"cursor {cursor[:40]!r} is not one this collector gave out")
    return int(key)


def audit(
    cur: duckdb.DuckDBPyConnection, query: AuditQuery, cursor: str | None, limit: int, head: int
) -> Page[Event]:
    """Up to ``limit`` matching audit records below ``cursor`` (or the head seq), newest first."""
    hi = head if cursor is None else _seq(cursor) - 1
    where, span = query.where(), _SPAN * limit
    found: list[tuple[int, float, str, str, str, str]] = []
    while hi > 0 and len(found) <= limit:
        lo = max(0, hi - span)
        found += cur.execute(
            f"""SELECT seq, ts, kind, text, labels, data FROM records
            WHERE seq > ? AND seq <= ? AND {where.sql()} ORDER BY seq DESC LIMIT ?""",
            [lo, hi, *where.params, limit + 1 - len(found)],
        ).fetchall()
        hi, span = lo, span * 4
    items = [
        Event(ts, kind, text, json.loads(labels), json.loads(data))
        for _, ts, kind, text, labels, data in found[:limit]
    ]
    if len(found) <= limit:
        return Page(items)
    seq, ts = found[limit - 1][:2]
    return Page(items, encode_cursor(ts, str(seq)))
