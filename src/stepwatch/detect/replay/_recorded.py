"""Recorded runs read back as time-ordered chunks, so detection can replay them like live data.

Three sources: a scenario directory (metrics.parquet or metrics.csv.gz plus
logs.jsonl), a Parquet file from ``Store.export_parquet``, and a run in a store
file. Samples stream in Arrow row batches and become numpy columns; series keys
are interned once into one table, so a series keeps its index in every chunk.
"""

from __future__ import annotations

import gzip
import json
import math
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..._text import plural
from ...model import NO_STEP, Event, SampleBatch, SeriesKey
from ...store import Store

__all__ = ["Chunk", "RecordingError", "RecordingInfo", "describe", "read_recorded"]

_REQUIRED = ("ts", "run", "name", "value")
_LABELS = ("run", "node", "rank", "gpu")
_CSV_TYPES = {
    "ts": pa.float64(),
    "value": pa.float64(),
    "step": pa.int64(),
    "rank": pa.int64(),
    "gpu": pa.int64(),
}
_SEP = "\x1f"
_ALL_EVENTS = 2**62
#: Runs a message about a store names at most.
_RUNS_NAMED = 10


class RecordingError(ValueError):
    """A recorded input that cannot be read; the message names the path and what is wrong."""


@dataclass(slots=True)
class Chunk:
    """Samples (sorted by ts) and log events of one stretch of data time up to ``end``.

    ``batch.keys`` is the table of every series seen so far, so an index means
    the same series in every chunk; ``batch.events`` holds the log events with
    ts after the previous chunk's ``end`` and at most this one's, sorted by ts.
    """

    batch: SampleBatch
    end: float


@dataclass(frozen=True, slots=True)
class RecordingInfo:
    """What a recorded input holds, known before reading it (a progress bar's total)."""

    path: Path
    format: str
    samples: int
    planned_total_steps: int | None = None


@dataclass(slots=True)
class _Source:
    """A resolved input: the metrics file, its format and where the log events come from."""

    metrics: Path
    format: str
    logs: Path | None = None
    planned_total_steps: int | None = None


def _kind(path: Path) -> str:
    """Tell a scenario directory, a Parquet file and a store file apart."""
    if path.is_dir():
        return "scenario"
    if not path.is_file():
        raise RecordingError(f"{path}: no such file or directory")
    with path.open("rb") as f:
        head = f.read(12)
    if head[:4] == b"PAR1":
        return "parquet"
    if head[8:12] == b"DUCK":
        return "store"
    raise RecordingError(
        f"{path}: unknown format: expected a scenario directory, a Parquet export or a store file"
    )


def _scenario(path: Path) -> _Source:
    """The files of a scenario directory."""
    logs = path / "logs.jsonl"
    planned = _planned_steps(path / "labels.json")
    for name, fmt in (("metrics.parquet", "parquet"), ("metrics.csv.gz", "csv")):
        if (path / name).is_file():
            return _Source(path / name, fmt, logs if logs.is_file() else None, planned)
    raise RecordingError(f"{path}: no metrics.parquet or metrics.csv.gz in this directory")


def _planned_steps(path: Path) -> int | None:
    """The planned total steps of a scenario's labels.json, when there is one."""
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RecordingError(f"{path}: not valid JSON: {e}") from e
    planned = meta.get("planned_total_steps") if isinstance(meta, dict) else None
    return int(planned) if isinstance(planned, int) else None


def _open_store(source: Path | Store, run: str | None) -> AbstractContextManager[Store]:
    """The store holding the run: opened here from a path (closed on exit) or the caller's."""
    path = source.path if isinstance(source, Store) else source
    store = source if isinstance(source, Store) else Store(path)  # its StoreError names the file
    if run is None or (store.get_run(run) is None and not store.series(match={"run": run})):
        error = _no_such_run(path, store, run)
        if store is not source:
            store.close()
        raise error
    return nullcontext(store) if store is source else store


def _no_such_run(path: Path, store: Store, run: str | None) -> RecordingError:
    """What to say when no run or an unknown one was asked of a store: the runs it holds."""
    ids = dict.fromkeys(r.id for r in store.list_runs())  # newest first, then runs of series
    ids |= dict.fromkeys(sorted({r for s in store.series() if (r := s.key.label("run"))}))
    if not ids:
        return RecordingError(f"{path}: this store holds no runs")
    more = len(ids) - _RUNS_NAMED
    named = ", ".join(list(ids)[:_RUNS_NAMED]) + (f" and {more} more" if more > 0 else "")
    held = f"{plural(len(ids), 'run')}: {named}"
    if run is None:
        return RecordingError(f"{path}: a store holds many runs; name one (--run) of its {held}")
    return RecordingError(f"{path}: no run {run!r} in this store; its {held}")


def _check_columns(path: Path, names: Iterable[str]) -> list[str]:
    """The columns to read, or an error naming the required ones missing."""
    names = list(names)
    missing = [c for c in _REQUIRED if c not in names]
    if missing:
        raise RecordingError(f"{path}: missing columns {', '.join(missing)}")
    return [c for c in (*_REQUIRED, "step", "node", "rank", "gpu", "labels") if c in names]


def _parquet_file(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise RecordingError(f"{path}: not a readable Parquet file: {e}") from e


def _parquet_batches(path: Path, size: int) -> Iterator[pa.RecordBatch]:
    f = _parquet_file(path)
    columns = _check_columns(path, f.schema_arrow.names)
    try:
        yield from f.iter_batches(batch_size=size, columns=columns)
    except (pa.ArrowException, OSError) as e:
        raise RecordingError(f"{path}: cannot read: {e}") from e


def _csv_batches(path: Path) -> Iterator[pa.RecordBatch]:
    convert = pacsv.ConvertOptions(
        column_types=_CSV_TYPES, null_values=[""], strings_can_be_null=True
    )
    try:
        with gzip.open(path, "rb") as raw:
            reader = pacsv.open_csv(raw, convert_options=convert)
            _check_columns(path, reader.schema.names)
            yield from reader
    except (pa.ArrowException, OSError, EOFError) as e:
        raise RecordingError(f"{path}: cannot read as gzip-compressed CSV: {e}") from e


class _Interner:
    """One table of series keys for a whole recording, filled from Arrow columns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: list[SeriesKey] = []
        self._ids: dict[str, int] = {}
        self._rows = 0

    def columns(self, rb: pa.RecordBatch) -> tuple[np.ndarray, ...]:
        """(series, ts, step, value) of a row batch as numpy columns."""
        names = rb.schema.names
        ts = _floats(rb.column("ts"))
        bad = np.flatnonzero(~np.isfinite(ts))
        if bad.size:
            raise RecordingError(f"{self.path}: row {self._rows + bad[0] + 1}: ts is missing")
        self._rows += rb.num_rows
        value = _floats(rb.column("value"))
        step = (
            pc.fill_null(rb.column("step").cast(pa.int64()), NO_STEP).to_numpy()
            if "step" in names
            else np.full(rb.num_rows, NO_STEP, np.int64)
        )
        text = [
            pc.fill_null(rb.column(c).cast(pa.string()), "")
            for c in ("name", *_LABELS, "labels")
            if c in names
        ]
        joined = pc.binary_join_element_wise(*text, _SEP).dictionary_encode()
        table = np.array([self._intern(s, names) for s in joined.dictionary.to_pylist()], np.uint32)
        series = table[joined.indices.to_numpy(zero_copy_only=False)]
        return series, ts, np.asarray(step, np.int64), value

    def _intern(self, joined: str, names: list[str]) -> int:
        sid = self._ids.get(joined)
        if sid is None:
            sid = self._ids[joined] = len(self.keys)
            self.keys.append(self._key(joined, names))
        return sid

    def _key(self, joined: str, names: list[str]) -> SeriesKey:
        name, *parts = joined.split(_SEP)
        present = [c for c in (*_LABELS, "labels") if c in names]
        labels: dict[str, object] = {k: v for k, v in zip(present, parts, strict=True) if v}
        try:
            extra = json.loads(str(labels.pop("labels", "{}")))
            labels.update(extra)
            return SeriesKey.of(name, labels)
        except (ValueError, TypeError, AttributeError) as e:
            raise RecordingError(f"{self.path}: series {name!r}: {e}") from e


def _floats(col: pa.Array) -> np.ndarray:
    """A float64 numpy column with nulls as NaN."""
    return np.asarray(pc.fill_null(col.cast(pa.float64()), math.nan).to_numpy(), np.float64)


def _log_events(path: Path) -> Iterator[Event]:
    """The lines of a logs.jsonl as log events, checked to be in time order."""
    last = -math.inf
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            event = _log_event(f"{path}:{n}", line)
            if event.ts < last:
                raise RecordingError(f"{path}:{n}: log lines are not sorted by ts")
            last = event.ts
            yield event


def _log_event(where: str, line: str) -> Event:
    """One logs.jsonl record as an Event of kind "log"."""
    try:
        rec = json.loads(line)
        ts = float(rec["ts"])
        text = rec["line"]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise RecordingError(f"{where}: a log record needs ts and line: {e}") from e
    if not math.isfinite(ts) or not isinstance(text, str):
        raise RecordingError(f"{where}: a log record needs a finite ts and a string line")
    labels = {k: str(rec[k]) for k in ("run", "node", "rank") if rec.get(k) not in (None, "")}
    return Event(ts=ts, kind="log", text=text, labels=labels)


class _Chunker:
    """Cuts a stream of sorted samples into chunks at ts changes and deals out the events."""

    def __init__(self, path: Path, events: Iterator[Event], size: int) -> None:
        self.path, self.size = path, size
        self.interner = _Interner(path)
        self._events = events
        self._next: Event | None = next(events, None)
        self._parts: list[tuple[np.ndarray, ...]] = []
        self._pending = 0
        self._last = -math.inf
        self._seq = 0

    def feed(self, rb: pa.RecordBatch) -> Iterator[Chunk]:
        """Take one row batch; yield every chunk that is now complete."""
        cols = self.interner.columns(rb)
        ts = cols[1]
        if ts.size and (ts[0] < self._last or np.any(np.diff(ts) < 0)):
            raise RecordingError(f"{self.path}: samples are not sorted by ts")
        if not ts.size:
            return
        self._last = float(ts[-1])
        self._parts.append(cols)
        self._pending += ts.size
        while self._pending >= self.size:
            cols = self._merged()
            cut = int(np.searchsorted(cols[1], cols[1][self.size - 1], side="right"))
            if cut == cols[1].size:
                return
            self._parts, self._pending = [tuple(c[cut:] for c in cols)], cols[1].size - cut
            yield self._chunk(tuple(c[:cut] for c in cols), float(cols[1][cut - 1]))

    def finish(self) -> Iterator[Chunk]:
        """The samples and events left once the input has ended."""
        cols = self._merged()
        if cols[1].size or self._next is not None:
            self._parts, self._pending = [], 0
            yield self._chunk(cols, math.inf)

    def _merged(self) -> tuple[np.ndarray, ...]:
        if not self._parts:
            return (np.empty(0, np.uint32), np.empty(0), np.empty(0, np.int64), np.empty(0))
        return tuple(np.concatenate(c) for c in zip(*self._parts, strict=True))

    def _chunk(self, cols: tuple[np.ndarray, ...], end: float) -> Chunk:
        events: list[Event] = []
        while self._next is not None and self._next.ts <= end:
            events.append(self._next)
            self._next = next(self._events, None)
        if math.isinf(end):
            tail = [float(cols[1][-1])] if cols[1].size else []
            end = max(tail + [e.ts for e in events[-1:]])
        series, ts, step, value = cols
        batch = SampleBatch(
            str(self.path), self._seq, list(self.interner.keys), series, ts, step, value, events
        )
        self._seq += 1
        return Chunk(batch, end)


def _stream(
    path: Path, batches: Iterator[pa.RecordBatch], events: Iterator[Event], size: int
) -> Iterator[Chunk]:
    chunker = _Chunker(path, events, size)
    for rb in batches:
        yield from chunker.feed(rb)
    yield from chunker.finish()


def read_recorded(
    path: str | Path | Store,
    *,
    run: str | None = None,
    chunk_samples: int = 200_000,
    tmp_dir: str | Path | None = None,
    until: float | None = None,
) -> Iterator[Chunk]:
    """Chunks of a recorded run in data-time order, for replaying it through detection.

    Args:
        path: a scenario directory, a Parquet export, a store file or an open Store.
        run: the run to read from a store file (ignored otherwise).
        chunk_samples: about this many samples a chunk (more when many share one ts).
        tmp_dir: where a store run is exported before reading (the system's temp dir if None).
        until: the data time to stop at (samples and events up to it), None for all of it.
    """
    if chunk_samples < 1:
        raise ValueError(f"chunk_samples must be at least 1, got {chunk_samples}")
    if isinstance(path, Store) or (kind := _kind(Path(path))) == "store":
        chunks = _read_store(path, run, chunk_samples, tmp_dir)
    else:
        path = Path(path)
        src = _scenario(path) if kind == "scenario" else _Source(path, "parquet")
        batches = (
            _parquet_batches(src.metrics, chunk_samples)
            if src.format == "parquet"
            else _csv_batches(src.metrics)
        )
        events = _log_events(src.logs) if src.logs else iter(())
        chunks = _stream(src.metrics, batches, events, chunk_samples)
    yield from chunks if until is None else _up_to(chunks, until)


def _up_to(chunks: Iterator[Chunk], until: float) -> Iterator[Chunk]:
    """The chunks as far as data time ``until``: the one that crosses it cut there, none after
    (a forecast as of an earlier point sees only what was known then)."""
    for chunk in chunks:
        if chunk.end <= until:
            yield chunk
            continue
        b = chunk.batch
        n = int(np.searchsorted(b.ts, until, side="right"))
        events = [e for e in b.events if e.ts <= until]
        cols = (b.series[:n], b.ts[:n], b.step[:n], b.value[:n])
        yield Chunk(SampleBatch(b.source, b.seq, b.keys, *cols, events), until)
        return


def _read_store(
    source: str | Path | Store, run: str | None, size: int, tmp_dir: str | Path | None
) -> Iterator[Chunk]:
    """A store run exported to a temporary Parquet file, read with its log events."""
    with tempfile.TemporaryDirectory(dir=tmp_dir) as tmp:
        export = Path(tmp) / "run.parquet"
        with _open_store(source if isinstance(source, Store) else Path(source), run) as store:
            store.export_parquet(str(run), export)
            events = store.events(run=run, kind="log", limit=_ALL_EVENTS)
            path = store.path
        yield from _stream(path, _parquet_batches(export, size), iter(events), size)


def describe(path: str | Path | Store, *, run: str | None = None) -> RecordingInfo:
    """How many samples a recorded input holds (a store run is counted series by series)."""
    if isinstance(path, Store) or (kind := _kind(Path(path))) == "store":
        return _describe_store(path if isinstance(path, Store) else Path(path), run)
    path = Path(path)
    src = _scenario(path) if kind == "scenario" else _Source(path, "parquet")
    if src.format == "parquet":
        f = _parquet_file(src.metrics)
        _check_columns(src.metrics, f.schema_arrow.names)
        n = f.metadata.num_rows
    else:
        n = sum(rb.num_rows for rb in _csv_batches(src.metrics))
    return RecordingInfo(src.metrics, src.format, n, src.planned_total_steps)


def _describe_store(source: Path | Store, run: str | None) -> RecordingInfo:
    with _open_store(source, run) as store:
        n = sum(len(store.raw(s.id)["ts"]) for s in store.series(match={"run": str(run)}))
        got = store.get_run(str(run))
    return RecordingInfo(store.path, "store", n, got.planned_total_steps if got else None)
