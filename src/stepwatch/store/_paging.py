"""Paging and filtering the state tables: an opaque cursor, a page, SQL built from filters.

Lists run newest first by (ts, id); the cursor carries the last item's pair, so the next
page starts strictly after it and every item comes exactly once, however the table grows.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Page", "Where", "decode_cursor", "encode_cursor"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list, and the cursor of the next (None: this was the last)."""

    items: list[T]
    cursor: str | None = None


def encode_cursor(ts: float, key: str) -> str:
    """The opaque cursor after the item (ts, key)."""
    return base64.urlsafe_b64encode(json.dumps([repr(float(ts)), key]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(ts, key) from a cursor; ValueError for anything ``encode_cursor`` did not make."""
    try:
        ts, key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        ts = float(ts)
    except (binascii.Error, ValueError, TypeError, UnicodeError):
        raise ValueError(f"cursor {cursor[:40]!r} is not one this collector gave out") from None
    if not isinstance(key, str) or not math.isfinite(ts):
        raise ValueError(f"cursor {cursor[:40]!r} is not one this collector gave out")
    return ts, key


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
        a join on the runs table, so its cost does not depend on how many runs there are."""
        if projects is None:
            return self
        return self.add(
            f"{column} IN (SELECT id FROM runs WHERE list_contains(?::VARCHAR[], project))",
            sorted(projects),
        )

    def after(self, cursor: str | None, ts: str = "ts", key: str = "id") -> Where:
        """Rows strictly after the cursor in (ts DESC, key DESC) order."""
        if cursor is None:
            return self
        at, last = decode_cursor(cursor)
        return self.add(f"({ts} < ? OR ({ts} = ? AND {key} < ?))", at, at, last)

    def sql(self) -> str:
        return " AND ".join(self.terms) if self.terms else "true"
