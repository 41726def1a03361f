"""The collector's own records: a table apart from ingested events, numbered and hash-chained.

Each record carries the SHA-256 of the one before it (``prev``) and its own (``hash``), both
over ``canonical``, so an edited, removed or reordered record breaks the chain at that record;
the head (last seq and hash), written down elsewhere, also shows records cut from the end.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa

#: The ``prev`` of the first record.
GENESIS = "0" * 64

RECORDS_SCHEMA = pa.schema(
    [("seq", pa.int64()), ("ts", pa.float64())]
    + [(c, pa.string()) for c in ("kind", "text", "run", "labels", "data", "prev", "hash")]
)

_COLUMNS = "seq, ts, kind, text, run, labels, data, prev, hash"


@dataclass(frozen=True, slots=True)
class Head:
    """The newest record of the chain: what to write down to check the store against later."""

    seq: int
    hash: str


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """The outcome of re-computing the chain: ``problem`` names the first broken record."""

    head: Head
    records: int
    problem: str | None = None


def canonical(seq: int, row: Sequence[object], prev: str) -> bytes:
    """The bytes a record's hash covers: compact JSON with sorted keys of its seq, ts (a float
    written as Python's repr writes it), kind, text, run, labels and data (their stored JSON
    text) and the previous record's hash."""
    ts, kind, text, run, labels, data = row
    doc = {
        "data": data,
        "kind": kind,
        "labels": labels,
        "prev": prev,
        "run": run,
        "seq": seq,
        "text": text,
        "ts": ts,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def record_hash(seq: int, row: Sequence[object], prev: str) -> str:
    return hashlib.sha256(canonical(seq, row, prev)).hexdigest()


def chain(rows: Sequence[tuple[object, ...]], head: Head) -> tuple[pa.Table, Head]:
    """The records table rows of new event rows (``event_row``'s form) after ``head``."""
    out = []
    seq, prev = head.seq, head.hash
    for row in rows:
        seq += 1
        digest = record_hash(seq, row, prev)
        out.append((seq, *row, prev, digest))
        prev = digest
    columns = list(zip(*out, strict=True)) if out else [()] * len(RECORDS_SCHEMA)
    table = pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, RECORDS_SCHEMA, strict=True)],
        RECORDS_SCHEMA,
    )
    return table, Head(seq, prev)


def load_head(cur: duckdb.DuckDBPyConnection) -> Head:
    rows = cur.execute("SELECT seq, hash FROM records ORDER BY seq DESC LIMIT 1").fetchall()
    return Head(int(rows[0][0]), str(rows[0][1])) if rows else Head(0, GENESIS)


def verify(cur: duckdb.DuckDBPyConnection) -> ChainCheck:
    """Re-compute the chain in seq order; the first record that breaks it is the problem."""
    rows = cur.execute(f"SELECT {_COLUMNS} FROM records ORDER BY seq").fetchall()
    seq_of = {str(r[8]): int(r[0]) for r in rows}
    last, prev = 0, GENESIS
    for seq, *fields, stored_prev, stored_hash in rows:
        problem = _link_problem(int(seq), last, prev, str(stored_prev), seq_of)
        if problem is None and record_hash(int(seq), fields, str(stored_prev)) != stored_hash:
            problem = f"record {seq} ({fields[1]}) was changed: its content does not match its hash"
        if problem is not None:
            return ChainCheck(Head(last, prev), len(rows), problem)
        last, prev = int(seq), str(stored_hash)
    return ChainCheck(Head(last, prev), len(rows))


def _link_problem(
    seq: int, last: int, prev: str, stored_prev: str, seq_of: dict[str, int]
) -> str | None:
    """Why record ``seq`` does not follow record ``last`` (whose hash is ``prev``), if not."""
    if stored_prev == prev and seq == last + 1:
        return None
    if seq != last + 1 and stored_prev != prev:
        missing = (
            f"record {last + 1} was" if seq == last + 2 else f"records {last + 1} to {seq - 1} were"
        )
        return f"{missing} removed (record {seq} does not follow record {last})"
    if seq != last + 1:
        return f"record {seq} was renumbered: it follows record {last}"
    if stored_prev == GENESIS:
        return f"record {seq} is out of order: it was written first"
    if stored_prev in seq_of:
        return f"record {seq} is out of order: it was written after record {seq_of[stored_prev]}"
    if last == 0:
        return f"record {seq} was changed: it does not start the chain"
    return f"record {last} was changed: record {seq} does not follow from it"
