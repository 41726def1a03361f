"""Checkpoints of the collector's state and the data that came after one.

A checkpoint is saved with the store position it corresponds to: the next
sample rid and the next ingested-event eid when the state was taken. At start
the collector restores the state and reads back what the store took since,
in the order it took it, in chunks, so that a long outage is replayed in
bounded memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import duckdb
import numpy as np

from ..model import NO_STEP, Event, SampleBatch
from ._catalogue import Catalogue

__all__ = ["REPLAY_SOURCE", "Checkpoint", "Position"]

#: The source named by the batches read back from the store (no producer may claim it).
REPLAY_SOURCE = "stepwatch.replay"
#: Samples (or events) per batch read back: a chunk in memory, never the whole backlog.
CHUNK_ROWS = 200_000


@dataclass(frozen=True, slots=True)
class Position:
    """Where the store stands: the rid of the next sample and the eid of the next ingested
    event. Every commit moves one or both forward."""

    rid: int = 0
    eid: int = 0

    def within(self, end: Position) -> bool:
        """Everything up to here is also up to ``end``."""
        return self.rid <= end.rid and self.eid <= end.eid


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Parts' snapshots by name, saved in one transaction, and the position they stand at."""

    parts: Mapping[str, bytes]
    position: Position


def save(
    cur: duckdb.DuckDBPyConnection, parts: Mapping[str, bytes], position: Position, version: str
) -> None:
    """Replace the checkpoint: a part missing from ``parts`` is not carried over, since its
    state would stand at another position than the others'."""
    cur.execute("DELETE FROM checkpoints")
    cur.executemany(
        "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
        [(name, version, blob, position.rid, position.eid) for name, blob in parts.items()],
    )


def load(cur: duckdb.DuckDBPyConnection) -> Checkpoint | None:
    """The saved checkpoint, or None when there is none."""
    rows = cur.execute("SELECT name, blob, rid, eid FROM checkpoints ORDER BY name").fetchall()
    if not rows:
        return None
    return Checkpoint({n: bytes(b) for n, b, _, _ in rows}, Position(rows[0][2], rows[0][3]))


def samples_since(
    cur: duckdb.DuckDBPyConnection, catalogue: Catalogue, start: int, end: int
) -> Iterator[SampleBatch]:
    """Samples with rid in [start, end), in rid order, a chunk per batch."""
    while start < end:
        rows = cur.execute(
            """SELECT rid, series, ts, coalesce(step, ?) AS step, value FROM samples
            WHERE rid >= ? AND rid < ? ORDER BY rid LIMIT ?""",
            [NO_STEP, start, end, CHUNK_ROWS],
        ).fetchnumpy()
        if not len(rows["rid"]):
            return
        sids, series = np.unique(np.asarray(rows["series"]), return_inverse=True)
        found = catalogue.keys_of(cur, sids.tolist())
        keys = [found[int(s)] for s in sids.tolist()]
        yield SampleBatch(
            REPLAY_SOURCE,
            0,
            keys,
            series.astype(np.uint32),
            np.asarray(rows["ts"], np.float64),
            np.asarray(rows["step"], np.int64),
            np.asarray(rows["value"], np.float64),
        )
        start = int(rows["rid"][-1]) + 1


def events_since(cur: duckdb.DuckDBPyConnection, start: int, end: int) -> Iterator[SampleBatch]:
    """Ingested events with eid in [start, end), in eid order, a chunk per batch."""
    while start < end:
        rows = cur.execute(
            """SELECT eid, ts, kind, text, labels, data FROM events
            WHERE eid >= ? AND eid < ? ORDER BY eid LIMIT ?""",
            [start, end, CHUNK_ROWS],
        ).fetchall()
        if not rows:
            return
        events = [Event(ts, k, t, json.loads(lb), json.loads(d)) for _, ts, k, t, lb, d in rows]
        empty = np.empty(0, np.float64)
        no_rows = (np.empty(0, np.uint32), empty, np.empty(0, np.int64), empty)
        yield SampleBatch(REPLAY_SOURCE, 0, [], *no_rows, events)
        start = int(rows[-1][0]) + 1
