"""Paging and filtering the state tables and the records: an opaque cursor, a page, SQL
built from filters, and the newest rows read without reading them all.

Lists run newest first by seq (the records' write order; a state table's row carries the seq
of the record that last changed it and moves to the table's end when it changes). So rows lie
in seq order, the newest are in the last row groups, and a window of seqs below the head reads
only those (zone maps skip the rest); the cursor is the last seq given, so the next page starts
strictly below it and every item comes exactly once, however the table grows meanwhile.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import duckdb

__all__ = ["Page", "Where", "decode_cursor", "encode_cursor", "every", "newest"]

T = TypeVar("T")

#: The first window holds this many seqs per item of the page; each next one four times more.
_SPAN = 8


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list, and the cursor of the next (None: this was the last)."""

    items: list[T]
    cursor: str | None = None


def every(read: Callable[[str | None], Page[T]]) -> Iterator[T]:
    """Every item of a list, page after page (``read`` gets the cursor)."""
    cursor: str | None = None
    while True:
        page = read(cursor)
        yield from page.items
        if page.cursor is None:
            return
        cursor = page.cursor


def encode_cursor(seq: int) -> str:
    """The opaque cursor of the page below ``seq``."""
    return base64.urlsafe_b64encode(f"seq:{int(seq)}".encode()).decode()


def decode_cursor(cursor: str) -> int:
    """The seq of a cursor; ValueError for anything ``encode_cursor`` did not make."""
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
    except (binascii.Error, ValueError, UnicodeError):
        text = ""
    if not text.startswith("seq:") or not text[4:].isdigit():
        raise ValueError(f"cursor {cursor[:40]!r} is not one this collector gave out")
    return int(text[4:])


@dataclass(slots=True)
class Where:
    """A WHERE clause and its parameters, grown one optional filter at a time."""

    terms: list[str] = field(default_factory=list)
    params: list[object] = field(default_factory=list)

    def add(self, sql: str, *params: object) -> Where:
        self.terms.append(sql)
        self.params.extend(params)
        return self

    def eq(self, column: str, value: object | None) -> Where:
        """``column = value`` unless value is None (no filter)."""
        return self if value is None else self.add(f"{column} = ?", value)

    def projects(self, column: str, projects: Collection[str] | None) -> Where:
        """Only rows whose run (``column``) belongs to one of ``projects`` (None: every row);
        a filter in SQL over the runs table, never a list of runs built per request."""
        if projects is None:
            return self
        return self.add(
            f"{column} IN (SELECT id FROM runs WHERE list_contains(?::VARCHAR[], project))",
            sorted(projects),
        )

    def sql(self) -> str:
        return " AND ".join(self.terms) if self.terms else "true"


def newest(
    cur: duckdb.DuckDBPyConnection,
    select: str,
    where: Where,
    cursor: str | None,
    limit: int,
    head: int,
) -> tuple[list[Sequence[Any]], str | None]:
    """Up to ``limit`` rows of ``select`` (``SELECT cols FROM table``, ``seq`` first among
    the columns) passing ``where``, below the cursor (or ``head``), highest seq first, read
    window by window down from the top; and the cursor of the next page."""
    hi = head if cursor is None else decode_cursor(cursor) - 1
    span = _SPAN * limit
    found: list[Sequence[Any]] = []
    while hi > 0 and len(found) <= limit:
        lo = max(0, hi - span)
        found += cur.execute(
            f"{select} WHERE seq > ? AND seq <= ? AND {where.sql()} ORDER BY seq DESC LIMIT ?",
            [lo, hi, *where.params, limit + 1 - len(found)],
        ).fetchall()
        hi, span = lo, span * 4
    if len(found) <= limit:
        return found, None
    return found[:limit], encode_cursor(int(found[limit - 1][0]))
