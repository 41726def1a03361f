"""The current state of an alert: one row per alert id, kept by the records that change it.

This is the one place that says what an alert is now: its newest transition (by record seq,
the collector's write order) with the acknowledgement folded in; the alerts routes, the runs
summary, ``top`` and the dashboard all read these rows. An alert is open while its state is
one of ``OPEN_STATES`` (the lifecycle's names).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import duckdb

from ..model import Event
from ._paging import Page, Where, decode_cursor, encode_cursor, newest
from ._projection import Family, Replace, latest

__all__ = ["OPEN_STATES", "AlertQuery", "AlertRow", "AlertStates"]

#: States of an alert that is not over.
OPEN_STATES = ("pending", "firing")
#: What a list of alerts can ask for: ``open`` (pending or firing), one state, or all.
AlertStates = Literal["open", "firing", "pending", "resolved", "all"]

_ID = "json_extract_string(data, '$.id')"
_FIELDS = (
    "TRY_CAST(json_extract_string(data, '$.since') AS DOUBLE) AS since, "
    "coalesce(json_extract_string(data, '$.kind'), '') AS akind, "
    "coalesce(json_extract_string(data, '$.severity'), '') AS severity, "
    "lower(coalesce(json_extract_string(data, '$.state'), 'firing')) AS state"
)
_ACK = (
    "coalesce(json_extract_string(data, '$.by'), '') AS ack_by, "
    "coalesce(json_extract_string(data, '$.comment'), '') AS ack_comment"
)

FAMILY = Family(
    tables=("alert_state",),
    ddl=(
        """CREATE TABLE IF NOT EXISTS alert_state (
        id VARCHAR PRIMARY KEY, first_seq BIGINT NOT NULL, seq BIGINT NOT NULL,
        ts DOUBLE NOT NULL, since DOUBLE, run VARCHAR, kind VARCHAR NOT NULL,
        severity VARCHAR NOT NULL, state VARCHAR NOT NULL, open BOOLEAN NOT NULL,
        text VARCHAR NOT NULL, labels VARCHAR NOT NULL, data VARCHAR NOT NULL,
        acked_by VARCHAR, ack_comment VARCHAR, acked_at DOUBLE)""",
    ),
    kinds=frozenset({"alert", "alert_ack"}),
    steps=(
        Replace(
            "alert_state",
            f"""SELECT n.id, coalesce(o.first_seq, n.first_seq), n.seq, n.ts, n.since, n.run,
                n.akind, n.severity, n.state, n.state IN {OPEN_STATES!r}, n.text, n.labels,
                n.data, o.acked_by, o.ack_comment, o.acked_at
            FROM ({latest("{src}", "alert", _ID, _FIELDS)}) n
            LEFT JOIN alert_state o ON o.id = n.id""",
        ),
        f"""UPDATE alert_state SET acked_by = a.ack_by, ack_comment = a.ack_comment,
            acked_at = a.ts
        FROM ({latest("{src}", "alert_ack", _ID, _ACK)}) a
        WHERE alert_state.id = a.id AND alert_state.first_seq < a.seq""",
    ),
)

_COLUMNS = "seq, id, ts, since, run, kind, severity, state, text, labels, data, acked_by, "
_COLUMNS += "ack_comment, acked_at"
#: A run's alerts, looked up in the ``run`` index apart from the ordering (DuckDB's newest-first
#: limit filters the table scan by seq, which leaves the index unused).
_OF_RUN = "WITH of_run AS MATERIALIZED (SELECT * FROM alert_state WHERE run = ?)"
#: Step 4 of the schema: the index a run's alerts are found by, however long the history.
RUN_INDEX = "CREATE INDEX alert_state_run ON alert_state (run)"


@dataclass(frozen=True, slots=True)
class AlertRow:
    """An alert as it stands: its newest transition and, once someone acknowledged it, who."""

    id: str
    seq: int
    ts: float
    since: float | None
    run: str | None
    kind: str
    severity: str
    state: str
    text: str
    labels: dict[str, str]
    data: dict[str, Any]
    acked_by: str | None = None
    ack_comment: str | None = None
    acked_at: float | None = None

    @property
    def acked(self) -> bool:
        return self.acked_at is not None

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES

    def event(self) -> Event:
        """The newest transition as the record it was stored as."""
        return Event(self.ts, "alert", self.text, dict(self.labels), dict(self.data))

    @classmethod
    def of(cls, row: Sequence[Any]) -> AlertRow:
        seq, aid, ts, since, run, kind, severity, state, text, labels, data, by, note, at = row
        return cls(
            aid, seq, ts, since, run, kind, severity, state, text,
            json.loads(labels), json.loads(data), by, note, at,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class AlertQuery:
    """Which alerts a list wants; None is no filter. ``projects``: only alerts of runs of
    these projects (an identity's); ``since``/``until`` bound the newest transition's time.
    Open, firing and pending ones are few; the others are read newest first, window by window."""

    state: AlertStates = "open"
    run: str | None = None
    projects: Collection[str] | None = None
    kind: str | None = None
    severity: str | None = None
    since: float | None = None
    until: float | None = None

    def where(self) -> Where:
        where = Where().eq("run", self.run).eq("kind", self.kind).eq("severity", self.severity)
        where.projects("run", self.projects)
        if self.state == "open":
            where.add("open")
        elif self.state != "all":
            where.add("state = ?", self.state)
        if self.since is not None:
            where.add("ts >= ?", self.since)
        if self.until is not None:
            where.add("ts <= ?", self.until)
        return where


def get(cur: duckdb.DuckDBPyConnection, alert_id: str) -> AlertRow | None:
    """One alert by id (an index lookup)."""
    rows = cur.execute(f"SELECT {_COLUMNS} FROM alert_state WHERE id = ?", [alert_id]).fetchall()
    return AlertRow.of(rows[0]) if rows else None


def page(
    cur: duckdb.DuckDBPyConnection, query: AlertQuery, cursor: str | None, limit: int, head: int
) -> Page[AlertRow]:
    """Up to ``limit`` matching alerts below ``cursor``, the latest changed first. Open ones
    (few, however old) are picked from the ``open`` column in one scan, a run's from the
    ``run`` index; others window down from ``head``."""
    where, select = query.where(), f"SELECT {_COLUMNS} FROM alert_state"
    if query.state in ("all", "resolved") and query.run is None:
        rows, after = newest(cur, select, where, cursor, limit, head)
        return Page([AlertRow.of(r) for r in rows], after)
    if cursor is not None:
        where.add("seq < ?", decode_cursor(cursor))
    params = [*where.params, limit + 1]
    if query.run is not None:  # through the run's index: the newest-first limit alone scans
        select = f"{_OF_RUN} SELECT {_COLUMNS} FROM of_run"
        params.insert(0, query.run)
    sql = f"{select} WHERE {where.sql()} ORDER BY seq DESC LIMIT ?"
    found = cur.execute(sql, params).fetchall()
    items = [AlertRow.of(r) for r in found[:limit]]
    return Page(items, encode_cursor(items[-1].seq) if len(found) > limit else None)


def open_counts(cur: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> dict[str, int]:
    """How many alerts are open, per run among ``runs``."""
    rows = cur.execute(
        "SELECT run, count(*) FROM alert_state WHERE open AND list_contains(?, run) GROUP BY run",
        [list(runs)],
    ).fetchall()
    return {str(r): int(n) for r, n in rows}
