"""The state tables' one mechanism: records fold into current-state rows by SQL, in the
transaction that writes them, and the same SQL over every record rebuilds the tables.

A family (alerts, silences, commands, actions) names its tables, the record kinds that change
them and the steps that fold a relation of new records (the ``records`` columns) into them:
a statement, or a ``Replace`` whose rows take the place of the rows of the same ids and move
to the end of the table (so a table lies in the order of the records that last changed its
rows; see ``_paging.newest``). Every step keeps, per item, the record with the highest seq,
and a follow-up record (an ack, an expiry) changes an item only when it was written after the
item's first record; so folding the records batch by batch and folding them all at once give
the same rows.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import duckdb

__all__ = ["Family", "Replace", "fold", "rebuild"]


@dataclass(frozen=True, slots=True)
class Replace:
    """Rows of ``table`` (by ``id``) replaced by those ``select`` makes, at the table's end."""

    table: str
    select: str


@dataclass(frozen=True, slots=True)
class Family:
    """The current-state tables of one family of records and how its records change them.

    ``steps`` hold ``{src}``: the relation of new records they fold in.
    """

    tables: tuple[str, ...]
    ddl: tuple[str, ...]
    kinds: frozenset[str]
    steps: tuple[str | Replace, ...]


def latest(src: str, kind: str, key: str, columns: str) -> str:
    """SQL of the newest record of ``kind`` per ``key`` in ``src``, with ``first_seq``, the
    seq of its oldest there; ``columns`` are the other expressions to keep (over ``data``)."""
    return f"""SELECT {key} AS id, seq, ts, run, text, labels, data,
        min(seq) OVER (PARTITION BY {key}) AS first_seq, {columns}
        FROM {src} WHERE kind = '{kind}' AND {key} IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY seq DESC) = 1"""


def fold(
    cur: duckdb.DuckDBPyConnection,
    families: Sequence[Family],
    src: str,
    kinds: Collection[str] | None = None,
) -> None:
    """Fold the records of relation ``src`` into the tables of the families they concern
    (``kinds``: the kinds ``src`` holds, when the caller knows them; None: every family)."""
    for family in families:
        if kinds is None or family.kinds & set(kinds):
            for step in family.steps:
                if isinstance(step, Replace):
                    _replace(cur, step.table, step.select.format(src=src))
                else:
                    cur.execute(step.format(src=src))


def _replace(cur: duckdb.DuckDBPyConnection, table: str, select: str) -> None:
    rows = cur.execute(select).to_arrow_table()
    if not rows.num_rows:
        return
    cur.register("_changed", rows)
    try:
        cur.execute(f"DELETE FROM {table} WHERE id IN (SELECT id FROM _changed)")
        cur.execute(f"INSERT INTO {table} SELECT * FROM _changed")
    finally:
        cur.unregister("_changed")


def rebuild(cur: duckdb.DuckDBPyConnection, families: Sequence[Family]) -> None:
    """Empty the families' tables and fold every stored record into them again."""
    for family in families:
        for table in family.tables:
            cur.execute(f"DELETE FROM {table}")
    fold(cur, families, "records")
