"""What the analyst model said of each incident, one row an incident: its text and the
playbooks it suggested, or, while it has not answered, its tries so far and why the last one
failed (so a restarted collector neither asks again at once nor asks for ever).

The table is the collector's own, written by its analyst alone; a bounded number of rows
(the oldest go first) of bounded text, so a storm of incidents cannot fill the disk.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import duckdb

__all__ = ["MAX_ANALYSIS_CHARS", "Analyses", "StoredAnalysis"]

Txn = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]

#: Step 9 of the schema.
DDL = """CREATE TABLE analyses (
    incident VARCHAR PRIMARY KEY, run VARCHAR, made_at DOUBLE NOT NULL, tries INTEGER NOT NULL,
    model VARCHAR NOT NULL, text VARCHAR, playbooks VARCHAR NOT NULL, error VARCHAR NOT NULL)"""
#: Rows kept at most: the most recently written (an analysis or a try).
MAX_ROWS = 10_000
#: The longest text kept; a longer answer is cut here.
MAX_ANALYSIS_CHARS = 16_000
_COLUMNS = "incident, run, made_at, tries, model, text, playbooks, error"


@dataclass(frozen=True, slots=True)
class StoredAnalysis:
    """An incident's analysis as kept: ``text`` None while no try succeeded (``error`` then
    says why the last failed); ``at`` is the wall time of the analysis or of the last try."""

    incident: str
    run: str | None
    at: float
    tries: int
    model: str
    text: str | None
    playbooks: tuple[str, ...]
    error: str

    @property
    def done(self) -> bool:
        return self.text is not None

    def as_json(self) -> dict[str, Any]:
        """The API's shape of a done analysis: marked as written by a model."""
        return {"by": "model", "model": self.model, "text": self.text, "at": self.at,
                "suggested_playbooks": list(self.playbooks)}  # fmt: skip

    @classmethod
    def of(cls, row: Sequence[Any]) -> StoredAnalysis:
        incident, run, at, tries, model, text, playbooks, error = row
        return cls(incident, run, at, tries, model, text, tuple(json.loads(playbooks)), error)


class Analyses:
    """The analyses table: written under the store's writer ``lock`` (a row at a time), read
    in transactions of their own."""

    def __init__(self, lock: threading.RLock, txn: Txn, max_rows: int = MAX_ROWS) -> None:
        self._lock, self._txn, self._max_rows = lock, txn, max_rows

    def put(
        self, incident: str, run: str | None, at: float, model: str, text: str,
        playbooks: Sequence[str],
    ) -> StoredAnalysis:  # fmt: skip
        """Keep ``text`` (cut to ``MAX_ANALYSIS_CHARS``) as the incident's analysis."""
        tries = self._tries(incident) + 1
        kept = StoredAnalysis(
            incident, run, at, tries, model, text[:MAX_ANALYSIS_CHARS], tuple(playbooks), ""
        )
        self._write(kept)
        return kept

    def failed(self, incident: str, run: str | None, at: float, model: str, error: str) -> int:
        """Count a failed try at the incident (unless it has an analysis); its tries so far."""
        kept = self.get(incident)
        if kept is not None and kept.done:
            return kept.tries
        tries = 1 if kept is None else kept.tries + 1
        self._write(StoredAnalysis(incident, run, at, tries, model, None, (), error[:1000]))
        return tries

    def get(self, incident: str) -> StoredAnalysis | None:
        """What is kept of the incident, or None."""
        return self.of_incidents([incident]).get(incident)

    def of_incidents(self, incidents: Sequence[str]) -> dict[str, StoredAnalysis]:
        """What is kept of each of ``incidents`` (those with a row)."""
        with self._txn() as cur:
            rows = cur.execute(
                f"SELECT {_COLUMNS} FROM analyses WHERE list_contains(?::VARCHAR[], incident)",
                [list(incidents)],
            ).fetchall()
        return {str(row[0]): StoredAnalysis.of(row) for row in rows}

    def _tries(self, incident: str) -> int:
        kept = self.get(incident)
        return 0 if kept is None else kept.tries

    def _write(self, kept: StoredAnalysis) -> None:
        row = [kept.incident, kept.run, float(kept.at), kept.tries, kept.model, kept.text,
               json.dumps(list(kept.playbooks)), kept.error]  # fmt: skip
        with self._lock, self._txn() as cur:
            cur.execute(
                f"INSERT OR REPLACE INTO analyses ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row
            )
            cur.execute(
                "DELETE FROM analyses WHERE incident NOT IN "
                "(SELECT incident FROM analyses ORDER BY made_at DESC, incident LIMIT ?)",
                [self._max_rows],
            )
