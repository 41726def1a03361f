"""The Store: one DuckDB file, one writer (the collector), queries from any thread."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import duckdb

from .. import __version__
from .._encryption import EncryptionKey
from .._log_query import LogQuery, plain_filters, with_filters
from ..model import Event, RecordBatch, Run, RunStatus, SampleBatch
from . import (
    _checkpoints,
    _compact,
    _encryption,
    _prune,
    _query,
    _records,
    _runs,
    _state,
    _summary,
    _tokens,
)
from ._analyses import Analyses
from ._catalogue import Catalogue
from ._checkpoints import Checkpoint, Position
from ._connect import connect
from ._errors import StoreError
from ._footprint import Footprint
from ._forecasts import Forecasts
from ._ingest import prepare, write
from ._log_search import LogHit, search_logs
from ._profiles import Profiles
from ._pruner import Pruner, StoreAccess
from ._records import ChainCheck, Head
from ._series_queries import SeriesQueries
from ._sources import DEFAULT_SOURCE_LIMIT, SourceBook
from ._space import file_bytes
from ._state import CurrentState
from ._summary import RunSummary
from ._tokens import TokenRecord

#: apply() compacts by itself once this many rows wait past the watermark.
AUTO_COMPACT_ROWS = 1_000_000
#: Rows rolled per compaction transaction, so a backlog never holds the writer for long.
COMPACT_CHUNK = 4_000_000

#: Resolved paths of the files open in this process: a second Store would fork the counters.
_OPEN: set[str] = set()
_OPEN_LOCK = threading.Lock()


class Store(SeriesQueries):
    """The embedded time-series store: series catalogue, samples, tiers, runs and events;
    ``current`` reads the current state of alerts, silences, commands and actions;
    ``retention`` keeps it within its ages; ``footprint`` measures it; ``forecasts`` keeps
    the forecast of each run.

    With ``key`` the file is an encrypted database (created so when new); a file opens only
    with the key it was written with, and a plain file only without one. Memory holds the
    last seqs and owners of the ``source_limit`` sources heard from latest; others are read
    back from the store. DuckDB's own memory (blocks it cached, indexes, rows not yet
    checkpointed, query work) stays within ``memory_limit`` bytes; what a query needs beyond
    it spills to a temporary file beside the store.

    Writes serialise on one lock; every read runs in its own cursor and
    transaction, so queries from other threads see a consistent snapshot.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        key: EncryptionKey | None = None,
        source_limit: int = DEFAULT_SOURCE_LIMIT,
        memory_limit: int | None = None,
    ) -> None:
        self.path = Path(path)
        self._source_limit = source_limit
        self.encrypted = key is not None
        self._clock = clock
        self._lock = threading.RLock()
        self._key = str(self.path.resolve())
        with _OPEN_LOCK:
            if self._key in _OPEN:
                raise StoreError(f"store {self.path} is already open in this process")
            _OPEN.add(self._key)
        self._closed = True
        self.current = CurrentState(self._txn, lambda: self._head.seq)
        try:
            self._con = connect(self.path, key, memory_limit)
            self._closed = False
            with self._txn() as cur:
                self._load(cur)
        except BaseException as e:
            if not self._closed:
                self.close()
            with _OPEN_LOCK:
                _OPEN.discard(self._key)
            if isinstance(e, duckdb.Error):
                raise StoreError(f"cannot read store {self.path}: {e}") from e
            raise

    def _load(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Bring the catalogue, the sources' last seqs and the row counters into memory."""
        self._cat = Catalogue.load(cur)
        ((watermark, after_last),) = cur.execute(
            "SELECT value, (SELECT coalesce(max(rid) + 1, 0) FROM samples) "
            "FROM meta WHERE key = 'watermark'"
        ).fetchall()
        self._watermark, self._next_rid = int(watermark), max(int(watermark), int(after_last))
        saved = _checkpoints.load(cur)  # retention may have deleted every event since
        ((next_eid,),) = cur.execute("SELECT coalesce(max(eid) + 1, 0) FROM events").fetchall()
        self._next_eid = max(int(next_eid), saved.position.eid if saved else 0)
        self._head = _records.load_head(cur)
        access = StoreAccess(
            self._lock,
            self._txn,
            self._snapshot,
            self._cursor,
            lambda: self._watermark,
            self._clock,
        )
        #: Retention and shedding (``retain``, ``shed``, ``kept``).
        self.retention = Pruner(access, _prune.read_newest(cur))
        self._sources = SourceBook(self._txn, self._source_limit)
        self._sources.load(cur)
        #: Its size on disk and in memory, and writing its log into the file.
        self.footprint = Footprint(self.path, self._lock, self._txn, self._cursor)
        #: The forecast kept of each run.
        self.forecasts = Forecasts(self._lock, self._txn)
        #: The profiler traces training processes uploaded.
        self.profiles = Profiles(self._lock, self._txn)
        #: What the analyst model said of each incident.
        self.analyses = Analyses(self._lock, self._txn)

    @property
    def closed(self) -> bool:
        """True once ``close`` ran (or the file could not be opened)."""
        return self._closed

    def close(self) -> None:
        """Close the file; the Store cannot be used afterwards."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._con.close()
            with _OPEN_LOCK:
                _OPEN.discard(self._key)

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A fresh cursor on the store's database, closed afterwards."""
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        cur = self._con.cursor()
        try:
            if self.encrypted:  # a new cursor starts in DuckDB's in-memory default database
                cur.execute(f"USE {_encryption.ALIAS}")
            yield cur
        finally:
            cur.close()

    @contextlib.contextmanager
    def _txn(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A fresh cursor inside a transaction: committed on success, rolled back on error."""
        with self._cursor() as cur:
            cur.execute("BEGIN")
            try:
                yield cur
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, int]]:
        """A read transaction and the watermark as that transaction sees it."""
        with self._txn() as cur:
            ((watermark,),) = cur.execute(
                "SELECT value FROM meta WHERE key = 'watermark'"
            ).fetchall()
            yield cur, int(watermark)

    # ---- ingest -------------------------------------------------------------------------

    def apply(self, batches: Sequence[SampleBatch]) -> list[bool]:
        """Store new batches in one transaction; False for a duplicate (seq already applied).

        Raises (and stores nothing of any batch) when a batch is malformed, or when a batch
        that is not a ``RecordBatch`` claims a source or an event kind of the collector's.
        """
        with self._lock:
            sent = {b.source for b in batches if not isinstance(b, RecordBatch)}
            seqs = self._sources.seqs(sent)
            with self._txn() as cur:
                prep = prepare(
                    batches, self._cat, cur, seqs, self._next_rid, self._next_eid, self._head
                )
                if any(prep.accepted):
                    write(cur, prep)
            if any(prep.accepted):
                self._cat.add(prep.new_series)
                self._next_rid = prep.next_rid
                self._next_eid = prep.next_eid
                self._sources.applied(prep.seqs)
                self._head = prep.head
                self.retention.heard(_prune.newest_ingested(batches, prep.accepted))
            if self._next_rid - self._watermark >= AUTO_COMPACT_ROWS:
                self.compact()
        return prep.accepted

    def position(self) -> Position:
        """Where the store stands now: what a checkpoint taken of the data so far names."""
        with self._lock:
            return Position(self._next_rid, self._next_eid)

    def save_checkpoint(self, parts: Mapping[str, bytes], position: Position) -> None:
        """Replace the checkpoint with these parts' snapshots, in one transaction."""
        with self._lock, self._txn() as cur:
            _checkpoints.save(cur, parts, position, __version__)

    def load_checkpoint(self) -> Checkpoint | None:
        """The last checkpoint saved, or None."""
        with self._txn() as cur:
            return _checkpoints.load(cur)

    def batches_since(self, start: Position, end: Position | None = None) -> Iterator[SampleBatch]:
        """What the store took from ``start`` up to ``end`` (now by default), in the order it
        took it, in chunks: samples in rid order (keys from the catalogue), then ingested
        events in eid order. One read transaction throughout."""
        end = end or self.position()
        cat = self._cat
        with self._txn() as cur:
            yield from _checkpoints.samples_since(cur, cat, start.rid, end.rid)
            yield from _checkpoints.events_since(cur, start.eid, end.eid)

    def claim_source(self, source: str, owner: str) -> str:
        """Bind ``source`` to ``owner`` unless it is bound already; the owner it is bound to."""
        with self._lock:
            return self._sources.claim(source, owner)

    def owner_of(self, source: str) -> str | None:
        """Who first sent ``source``, if it was heard from lately (from memory: never waits on
        the writer's lock); None may also mean "ask ``claim_source``"."""
        return self._sources.owner(source)

    def last_seq(self, source: str) -> int | None:
        """The last applied batch sequence number of a source."""
        with self._lock:
            return self._sources.seqs([source]).get(source)

    def compact(self) -> None:
        """Roll every row past the watermark into the tier tables, a chunk per transaction."""
        while self._compact_chunk():
            pass

    def _compact_chunk(self) -> bool:
        with self._lock:
            lo = self._watermark
            hi = min(self._next_rid, lo + COMPACT_CHUNK)
            if hi <= lo:
                return False
            with self._txn() as cur:
                _compact.compact_range(cur, lo, hi)
            self._watermark = hi
            return True

    def rebuild_state(self) -> None:
        """Make the current-state tables again from every record (a store older than them)."""
        with self._lock, self._txn() as cur:
            _state.rebuild(cur)

    # ---- runs and events ----------------------------------------------------------------

    def upsert_run(self, *runs: Run) -> None:
        """Insert or replace runs, in one transaction."""
        with self._lock:
            with self._txn() as cur:
                for run in runs:
                    _runs.upsert_run(cur, run)
            for run in runs:
                if run.status != RunStatus.RUNNING:
                    self._cat.forget(run.id)

    def get_run(self, run_id: str) -> Run | None:
        """The run with this id, or None."""
        with self._txn() as cur:
            return _runs.get_run(cur, run_id)

    def list_runs(
        self, project: str | None = None, status: str | None = None, limit: int | None = None
    ) -> list[Run]:
        """Runs, newest first, optionally of one project and/or status (the first ``limit``)."""
        with self._txn() as cur:
            return _runs.list_runs(cur, project, status, limit=limit)

    def finish_run(self, run_id: str, status: str, end: float | None = None) -> Run:
        """Set a run's final status and end time (now by default); KeyError if unknown."""
        if status not in RunStatus.ALL:
            raise ValueError(f"unknown run status {status!r}; one of {RunStatus.ALL}")
        with self._lock:
            with self._txn() as cur:
                run = _runs.get_run(cur, run_id)
                if run is None:
                    raise KeyError(run_id)
                run.status, run.end = status, self._clock() if end is None else float(end)
                _runs.upsert_run(cur, run)
            self._cat.forget(run_id)
        return run

    def events(
        self,
        run: str | None = None,
        kind: str | None = None,
        start: float | None = None,
        end: float | None = None,
        limit: int = 1000,
        runs: Collection[str] | None = None,
    ) -> list[Event]:
        """The newest ``limit`` events matching the filters, oldest first; ``runs`` keeps only
        events of those runs (a caller's projects)."""
        with self._txn() as cur:
            return _runs.events(cur, run, kind, start, end, limit, runs)

    def records(
        self,
        run: str | None = None,
        kind: str | None = None,
        start: float | None = None,
        end: float | None = None,
        limit: int = 1000,
        runs: Collection[str] | None = None,
    ) -> list[Event]:
        """The newest ``limit`` of the collector's own records matching the filters, oldest
        first; nothing ingested is ever among them; ``runs`` as in ``events``."""
        with self._txn() as cur:
            return _runs.events(cur, run, kind, start, end, limit, runs, table="records")

    def record_head(self) -> Head:
        """The last record's seq and hash (seq 0 and the genesis hash while there is none)."""
        return self._head

    def verify_records(self) -> ChainCheck:
        """Re-compute the records' hash chain from the file; names the first broken record."""
        with self._txn() as cur:
            return _records.verify(cur)

    def logs(
        self,
        *,
        run: str | None = None,
        runs: Collection[str] | None = None,
        text: str | None = None,
        node: str | None = None,
        rank: str | None = None,
        level: str | None = None,
        start: float | None = None,
        end: float | None = None,
        limit: int = 500,
    ) -> list[Event]:
        """The newest ``limit`` log lines holding ``text`` (ignoring case) and passing the
        filters, oldest first; ``runs`` keeps only lines of those runs. A search of those
        fields, which reads the newest lines first: the cost does not grow with the history."""
        found = plain_filters(q=text, run=run, node=node, rank=rank, level=level, start=start,
                              end=end)  # fmt: skip
        hits = self.search_logs(with_filters(None, found), runs=runs, limit=limit)
        return [hit.event for hit in reversed(hits)]

    def search_logs(
        self,
        query: LogQuery,
        *,
        runs: Collection[str] | None = None,
        limit: int = 100,
        context: int = 0,
        newest_first: bool = True,
        now: float | None = None,
    ) -> list[LogHit]:
        """Log lines matching a bool query, each with ``context`` lines of its stream around
        it; ``runs`` keeps only lines of those runs; ``now`` (default: the clock) resolves the
        query's date math."""
        at = self._clock() if now is None else now
        with self._txn() as cur:
            return search_logs(
                cur, query, now=at, runs=runs, limit=limit, context=context,
                newest_first=newest_first, end_eid=self._next_eid,
            )  # fmt: skip

    def run_summaries(
        self,
        project: str | None = None,
        status: str | None = None,
        *,
        run: str | None = None,
        projects: Collection[str] | None = None,
    ) -> list[RunSummary]:
        """Runs as ``list_runs`` orders them, each with its progress, pace, ETA and open alerts;
        ``run`` computes that one only, ``projects`` keeps the runs of those projects."""
        cat = self._cat
        with self._snapshot() as (cur, watermark):
            runs = _runs.list_runs(cur, project, status, run, projects)
            return _summary.summaries(cur, cat, runs, watermark)

    # ---- tokens ---------------------------------------------------------------------------

    def tokens(self) -> list[TokenRecord]:
        """Every API token (hashes only), revoked and expired ones too, oldest first."""
        with self._txn() as cur:
            return _tokens.all_tokens(cur)

    def put_token(self, token: TokenRecord) -> None:
        """Store a new token, or the new state (revoked) of a stored one."""
        with self._lock, self._txn() as cur:
            _tokens.put_token(cur, token)

    # ---- housekeeping -------------------------------------------------------------------

    def export_parquet(self, run_id: str, path: str | Path) -> Path:
        """Write a run's samples, time ordered, in the columns of a scenario's metrics.parquet
        (ts, run, name, value, step, node, rank, gpu) plus labels as JSON."""
        path = Path(path)
        with self._txn() as cur:
            _query.export_parquet(cur, run_id, path)
        return path

    def export_dataset(
        self, out: str | Path, project: str | None = None, runs: list[str] | None = None
    ) -> dict[str, int]:
        """Write samples, alerts, GPUs and runs (of ``project`` and/or ``runs``; all by default) as
        Hive-partitioned Parquet datasets, ``out/<table>/project=P/run=R/day=D/``, that Spark,
        DuckDB, Polars and pyarrow read as they are; the rows written of each table."""
        with self._txn() as cur:
            return _query.export_dataset(cur, Path(out), project, runs)

    def stats(self) -> dict[str, int]:
        """Sizes: samples, series, runs, events, records, rows not yet compacted, bytes on disk,
        series of runs held in memory."""
        with self._snapshot() as (cur, watermark):
            ((samples, runs, events, records),) = cur.execute(
                "SELECT (SELECT count(*) FROM samples), (SELECT count(*) FROM runs), "
                "(SELECT count(*) FROM events), (SELECT count(*) FROM records)"
            ).fetchall()
        return {
            "samples": int(samples),
            "series": len(self._cat),
            "runs": int(runs),
            "events": int(events),
            "records": int(records),
            "uncompacted": self._next_rid - watermark,
            "file_bytes": file_bytes(self.path),
            "resident_series": self._cat.resident()[1],
        }
