"""Turning sample batches into column tables for one insert (``prepare``), then the insert
(``write``).

Everything that can reject a batch (shape, ranges, unserialisable event data)
runs in ``prepare``, before any write, so a failure leaves the store untouched;
``write`` appends Arrow tables, column-wise, never a Python loop per sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from .._event_json import event_json
from ..model import NO_STEP, Event, RecordBatch, SampleBatch, SeriesKey, check_producer_batch
from . import _state
from ._catalogue import Catalogue, NewSeries
from ._records import Head, chain

SAMPLES_SCHEMA = pa.schema(
    [
        ("rid", pa.int64()),
        ("series", pa.int32()),
        ("ts", pa.float64()),
        ("step", pa.int64()),
        ("value", pa.float64()),
    ]
)
SERIES_SCHEMA = pa.schema(
    [("id", pa.int32()), ("grp", pa.int32())]
    + [(c, pa.string()) for c in ("name", "run", "node", "rank", "gpu", "labels")]
)
EVENTS_SCHEMA = pa.schema(
    [("ts", pa.float64())]
    + [(c, pa.string()) for c in ("kind", "text", "run", "labels", "data")]
    + [("eid", pa.int64())]
)


@dataclass(slots=True)
class Prepared:
    """What one ``apply`` call will write, and the in-memory state once it has committed."""

    accepted: list[bool]
    new_series: NewSeries
    series: pa.Table
    samples: pa.Table
    events: pa.Table
    records: pa.Table
    seqs: dict[str, int]
    next_rid: int
    next_eid: int
    head: Head


def rows_table(rows: Sequence[Sequence[object]], schema: pa.Schema) -> pa.Table:
    """An Arrow table from a few Python rows (catalogue entries, events)."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.table([pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema)


def event_row(event: Event) -> tuple[object, ...]:
    """The events table row of one event; raises for data that JSON cannot hold."""
    return (
        float(event.ts),
        str(event.kind),
        str(event.text),
        event.labels.get("run"),
        event_json(event.labels),
        event_json(event.data),
    )


def _check(batch: SampleBatch) -> None:
    batch.check()
    if not isinstance(batch, RecordBatch):
        check_producer_batch(batch)
    if (
        len(batch)
        and np.issubdtype(batch.series.dtype, np.signedinteger)
        and batch.series.min() < 0
    ):
        raise ValueError(f"batch {batch.source}/{batch.seq}: negative series index")


def _accept(
    batches: Sequence[SampleBatch], last_seq: Mapping[str, int]
) -> tuple[list[bool], dict[str, int]]:
    """Which batches are new (seq above the source's last applied one), and the new last seqs;
    the collector's records are always new (written once, numbered by the store)."""
    accepted: list[bool] = []
    seqs: dict[str, int] = {}
    for batch in batches:
        if isinstance(batch, RecordBatch):
            accepted.append(True)
            continue
        last = seqs.get(batch.source, last_seq.get(batch.source))
        ok = last is None or batch.seq > last
        accepted.append(ok)
        if ok:
            seqs[batch.source] = batch.seq
    return accepted, seqs


def _samples(batches: list[SampleBatch], ids: Mapping[SeriesKey, int], first_rid: int) -> pa.Table:
    """One Arrow table of every sample, series indices mapped to store ids, steps nulled."""
    parts = [b for b in batches if len(b)]
    if not parts:
        return SAMPLES_SCHEMA.empty_table()
    sid = np.concatenate([np.array([ids[k] for k in b.keys], np.int32)[b.series] for b in parts])
    step = np.concatenate([np.asarray(b.step, np.int64) for b in parts])
    columns = [
        np.arange(first_rid, first_rid + sid.shape[0], dtype=np.int64),
        sid,
        np.concatenate([np.asarray(b.ts, np.float64) for b in parts]),
        pa.array(step, pa.int64(), mask=step == NO_STEP),
        np.concatenate([np.asarray(b.value, np.float64) for b in parts]),
    ]
    return pa.table(columns, SAMPLES_SCHEMA)


def prepare(
    batches: Sequence[SampleBatch],
    catalogue: Catalogue,
    cur: duckdb.DuckDBPyConnection,
    last_seq: Mapping[str, int],
    rid: int,
    eid: int,
    head: Head,
) -> Prepared:
    """Check every batch and build the tables to append; raises before anything is written.

    Ingested events go to ``events``, the collector's (a ``RecordBatch``) to ``records``,
    chained after ``head`` in the order of ``batches``: the writer thread's commit order.
    Ingested events are numbered from ``eid`` on, as samples are from ``rid``: a checkpoint of
    the collector's state names where in both it stands. ``cur`` reads back the series of
    runs the catalogue no longer holds in memory.
    """
    for batch in batches:
        _check(batch)
    accepted, seqs = _accept(batches, last_seq)
    chosen = [b for b, ok in zip(batches, accepted, strict=True) if ok]
    new_series = catalogue.register(cur, (k for b in chosen for k in b.keys))
    samples = _samples(chosen, new_series.ids, rid)
    produced = [e for b in chosen if not isinstance(b, RecordBatch) for e in b.events]
    ingested = [(*event_row(e), eid + i) for i, e in enumerate(produced)]
    records, head = chain(
        [event_row(e) for b in chosen if isinstance(b, RecordBatch) for e in b.events], head
    )
    return Prepared(
        accepted,
        new_series,
        rows_table(new_series.rows(), SERIES_SCHEMA),
        samples,
        rows_table(ingested, EVENTS_SCHEMA),
        records,
        seqs,
        rid + samples.num_rows,
        eid + len(ingested),
        head,
    )


def write(cur: duckdb.DuckDBPyConnection, prep: Prepared) -> None:
    """Append the prepared tables, fold the new records into the state tables and record
    each source's last applied seq."""
    for table, rows in (
        ("series", prep.series),
        ("samples", prep.samples),
        ("events", prep.events),
        ("records", prep.records),
    ):
        if rows.num_rows:
            cur.register("_rows", rows)
            cur.execute(f"INSERT INTO {table} SELECT * FROM _rows")
            if table == "records":
                _state.fold(cur, "_rows", set(rows.column("kind").to_pylist()))
            cur.unregister("_rows")
    if prep.seqs:
        cur.executemany("INSERT OR REPLACE INTO sources VALUES (?, ?)", list(prep.seqs.items()))
