"""Reading the newest audit records without reading them all: the records table is written in
seq order, so the newest lie in its last row groups (see ``_paging.newest``)."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass

import duckdb

from ..model import Event
from ._paging import Page, Where, newest

__all__ = ["AuditQuery"]


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


def audit(
    cur: duckdb.DuckDBPyConnection, query: AuditQuery, cursor: str | None, limit: int, head: int
) -> Page[Event]:
    """Up to ``limit`` matching audit records below ``cursor`` (or the head seq), newest first."""
    select = "SELECT seq, ts, kind, text, labels, data FROM records"
    rows, after = newest(cur, select, query.where(), cursor, limit, head)
    items = [Event(ts, kind, text, json.loads(labels), json.loads(data))
             for _, ts, kind, text, labels, data in rows]  # fmt: skip
    return Page(items, after)
