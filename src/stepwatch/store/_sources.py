"""What the store knows per source (its last applied seq, the identity it belongs to), kept in
memory only for the sources heard from lately.

A collector that runs for months hears from a new source per trainer, rank and agent of every
run; both facts live in tables (``sources``, ``source_owners``), so memory holds the most
recently used ``limit`` of each and reads any other back from its table: dedup and ownership
stay exact for a source silent for months, and memory no longer grows with every source ever.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from typing import Any

import duckdb

from .._recent import Recent

__all__ = ["DEFAULT_SOURCE_LIMIT", "SourceBook"]

#: Sources whose seq and owner are kept in memory (each a few hundred bytes).
DEFAULT_SOURCE_LIMIT = 10_000

Cursor = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]


class SourceBook:
    """Last seqs and owners of sources: the recent ones in memory, all of them in the store.

    ``seqs`` and ``claim`` run under the store's write lock; ``owner`` only reads memory (the
    event loop asks it and must never wait on the writer): None sends the caller to ``claim``.
    """

    def __init__(self, txn: Cursor, limit: int = DEFAULT_SOURCE_LIMIT) -> None:
        self._cursor = txn
        self.last_seqs: Recent[str, int] = Recent(limit)
        self.owners: Recent[str, str] = Recent(limit)

    def load(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Fill memory at open with up to ``limit`` of each (whichever the tables list first)."""
        for recent, select in (
            (self.last_seqs, "SELECT source, seq FROM sources"),
            (self.owners, "SELECT source, owner FROM source_owners"),
        ):
            for source, value in cur.execute(f"{select} LIMIT ?", [recent.limit]).fetchall():
                recent.put(source, value)

    def seqs(self, sources: Collection[str]) -> dict[str, int]:
        """The last applied seq of each of ``sources`` that has one."""
        found = {s: seq for s in sources if (seq := self.last_seqs.get(s)) is not None}
        missing = [s for s in sources if s not in found]
        if missing:
            for source, last in self._read("SELECT source, seq FROM sources", missing):
                found[source] = int(last)
                self.last_seqs.put(source, int(last))
        return found

    def applied(self, seqs: dict[str, int]) -> None:
        """Sources' new last seqs, just committed."""
        for source, seq in seqs.items():
            self.last_seqs.put(source, seq)

    def owner(self, source: str) -> str | None:
        """Who ``source`` belongs to, if memory holds it."""
        return self.owners.get(source)

    def claim(self, source: str, owner: str) -> str:
        """Bind ``source`` to ``owner`` unless it is bound already; the owner it is bound to."""
        bound = self.owners.get(source)
        if bound is None:
            rows = list(self._read("SELECT source, owner FROM source_owners", [source]))
            if rows:
                bound = str(rows[0][1])
            else:
                with self._cursor() as cur:
                    cur.execute("INSERT INTO source_owners VALUES (?, ?)", [source, owner])
                bound = owner
            self.owners.put(source, bound)
        return bound

    def _read(self, select: str, sources: list[str]) -> list[tuple[Any, Any]]:
        with self._cursor() as cur:
            query = f"{select} WHERE source IN (SELECT unnest(?))"
            return cur.execute(query, [sources]).fetchall()
