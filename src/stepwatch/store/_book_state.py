"""The current state of silences, commands and actions: one row per item, kept by the records
that change it, so a restarted collector reads back what is open, not its whole history.

Rows hold the item in the JSON shape its own records carry (``data``), with what follow-up
records add (a silence's expiry, a command's answer) in columns beside it.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import duckdb

from ._paging import Page, Where, newest
from ._projection import Family, Replace, latest

__all__ = ["ActionQuery"]

_ID = "json_extract_string(data, '$.id')"


def _num(path: str, cast: str = "DOUBLE") -> str:
    return f"TRY_CAST(json_extract_string(data, '$.{path}') AS {cast})"


def _str(path: str, default: str = "") -> str:
    return f"coalesce(json_extract_string(data, '$.{path}'), '{default}')"


_SILENCE = f"{_num('starts')} AS starts, {_num('ends')} AS ends"
_EXPIRY = f"{_str('by')} AS expired_by"
_COMMAND = f"{_num('seq', 'BIGINT')} AS num, json_extract_string(data, '$.run') AS crun"
_ANSWER = (
    f"json_extract_string(data, '$.run') AS crun, {_str('result', 'ok')} AS result, "
    f"{_str('detail')} AS detail, {_num('step', 'BIGINT')} AS step, "
    "json_extract(data, '$.answers') AS answers"
)
_ACTION = f"{_str('state')} AS state, {_num('created')} AS created"

SILENCES = Family(
    tables=("silence_state",),
    ddl=(
        """CREATE TABLE IF NOT EXISTS silence_state (
        id VARCHAR PRIMARY KEY, first_seq BIGINT NOT NULL, seq BIGINT NOT NULL,
        starts DOUBLE, ends DOUBLE, data VARCHAR NOT NULL, expired_at DOUBLE,
        expired_by VARCHAR)""",
    ),
    kinds=frozenset({"silence", "silence_expired"}),
    steps=(
        f"""INSERT INTO silence_state
        SELECT id, first_seq, seq, starts, ends, data, NULL, NULL
        FROM ({latest("{src}", "silence", _ID, _SILENCE)})
        ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, starts = excluded.starts,
            ends = excluded.ends, data = excluded.data""",
        f"""UPDATE silence_state SET expired_at = e.ts, expired_by = e.expired_by
        FROM ({latest("{src}", "silence_expired", _ID, _EXPIRY)}) e
        WHERE silence_state.id = e.id AND silence_state.first_seq < e.seq""",
    ),
)

COMMANDS = Family(
    tables=("command_state",),
    ddl=(
        """CREATE TABLE IF NOT EXISTS command_state (
        id VARCHAR PRIMARY KEY, first_seq BIGINT NOT NULL, run VARCHAR NOT NULL,
        num BIGINT, ts DOUBLE NOT NULL, data VARCHAR NOT NULL, status VARCHAR NOT NULL,
        detail VARCHAR, step BIGINT, acked_ts DOUBLE)""",
    ),
    kinds=frozenset({"command", "command_ack"}),
    steps=(
        f"""INSERT INTO command_state
        SELECT id, first_seq, crun, num, ts, data, 'pending', NULL, NULL, NULL
        FROM ({latest("{src}", "command", _ID, _COMMAND)}) WHERE crun IS NOT NULL
        ON CONFLICT (id) DO NOTHING""",
        # an answer of one of the ranks a command names carries all the ranks' answers so far
        # (into ``data``) and leaves it pending until the last
        f"""UPDATE command_state SET status = a.result, detail = a.detail, step = a.step,
            acked_ts = CASE WHEN a.result = 'pending' THEN NULL ELSE a.ts END,
            data = CASE WHEN a.answers IS NULL THEN command_state.data ELSE CAST(
                json_merge_patch(command_state.data, json_object('answers', a.answers))
                AS VARCHAR) END
        FROM ({latest("{src}", "command_ack", _ID, _ANSWER)}) a
        WHERE command_state.id = a.id AND command_state.run = a.crun
            AND command_state.first_seq < a.seq""",
    ),
)

ACTIONS = Family(
    tables=("action_state",),
    ddl=(
        """CREATE TABLE IF NOT EXISTS action_state (
        id VARCHAR PRIMARY KEY, seq BIGINT NOT NULL, created DOUBLE, updated DOUBLE NOT NULL,
        state VARCHAR NOT NULL, run VARCHAR, data VARCHAR NOT NULL)""",
    ),
    kinds=frozenset({"action"}),
    steps=(
        Replace(
            "action_state",
            f"""SELECT id, seq, coalesce(created, ts), ts, state, run, data
            FROM ({latest("{src}", "action", _ID, _ACTION)})""",
        ),
    ),
)

#: Commands a restarted collector needs: every one of a running run, and any still pending.
_LIVE = "(c.status = 'pending' OR c.run IN (SELECT id FROM runs WHERE status = 'running'))"


def silences(
    cur: duckdb.DuckDBPyConnection, now: float, include_ended: bool
) -> list[dict[str, Any]]:
    """Silences (their records' data plus ``expired_at``) not yet ended at ``now``, or every
    one; oldest start first."""
    where = "true" if include_ended else "expired_at IS NULL AND ends > ?"
    rows = cur.execute(
        f"SELECT data, expired_at FROM silence_state WHERE {where} ORDER BY starts, id",
        [] if include_ended else [now],
    ).fetchall()
    return [{**json.loads(data), "expired_at": at} for data, at in rows]


def commands(
    cur: duckdb.DuckDBPyConnection, run: str | None = None, live: bool = False
) -> list[dict[str, Any]]:
    """Commands in the shape of their ``command`` record plus their answer (status, detail,
    step, acked_ts), by run then number: of one run, or with ``live`` those a restarted
    collector needs (every command of a running run, and any still pending)."""
    where = Where().eq("c.run", run)
    if live:
        where.add(_LIVE)
    rows = cur.execute(
        f"""SELECT c.data, c.status, c.detail, c.step, c.acked_ts FROM command_state c
        WHERE {where.sql()} ORDER BY c.run, c.num""",
        where.params,
    ).fetchall()
    return [
        {**json.loads(data), "status": status, "detail": detail or "", "step": step, "acked_ts": at}
        for data, status, detail, step, at in rows
    ]


@dataclass(frozen=True, slots=True)
class ActionQuery:
    """Which actions a list wants; None is no filter (``projects`` as in ``AlertQuery``)."""

    run: str | None = None
    states: Collection[str] | None = None
    projects: Collection[str] | None = None

    def where(self) -> Where:
        where = Where().eq("run", self.run).projects("run", self.projects)
        if self.states is not None:
            where.add("list_contains(?::VARCHAR[], state)", sorted(self.states))
        return where


def actions(
    cur: duckdb.DuckDBPyConnection, query: ActionQuery, cursor: str | None, limit: int, head: int
) -> Page[dict[str, Any]]:
    """Up to ``limit`` matching actions (their newest record's data) below ``cursor``, the
    latest changed first."""
    select = "SELECT seq, data FROM action_state"
    rows, after = newest(cur, select, query.where(), cursor, limit, head)
    return Page([json.loads(data) for _, data in rows], after)


def action(cur: duckdb.DuckDBPyConnection, action_id: str) -> dict[str, Any] | None:
    """One action as it stands (its newest record's data), by id."""
    rows = cur.execute("SELECT data FROM action_state WHERE id = ?", [action_id]).fetchall()
    return json.loads(rows[0][0]) if rows else None
