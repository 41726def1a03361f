"""The write-ahead log is written into the file on ``checkpoint``, even with a reader's
transaction open (as a collector always has), and what the log held stops taking memory."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from stepwatch.model import SeriesKey
from stepwatch.store import Store

from .conftest import T0, batch

LOSS = SeriesKey.of("loss", {"run": "r1"})


def _wal(store: Store) -> int:
    wal = store.path.with_name(store.path.name + ".wal")
    return wal.stat().st_size if wal.exists() else 0


def _in_memory_tables(store: Store) -> int:
    with store._cursor() as cur:
        ((held,),) = cur.execute(
            "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() "
            "WHERE tag = 'IN_MEMORY_TABLE'"
        ).fetchall()
    return int(held)


class _Readers:
    """Two threads reading in short transactions, one after another, as a collector's do."""

    def __init__(self, store: Store) -> None:
        self.store, self.reads = store, 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._read) for _ in range(2)]
        for thread in self._threads:
            thread.start()
        while not self.reads:
            time.sleep(0.001)

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                with self.store._txn() as cur:
                    cur.execute("SELECT count(*) FROM samples").fetchall()
                    time.sleep(0.002)
                self.reads += 1
            except BaseException as exc:
                self.errors.append(exc)
                return

    def stop(self) -> int:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        assert self.errors == []
        return self.reads


def test_a_checkpoint_empties_the_log_and_frees_what_it_held(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        store.footprint.checkpoint()  # the tables' creation
        assert not store.footprint.checkpoint()  # nothing logged since: nothing to do
        n = 200_000
        ts = T0 + np.arange(n, dtype=np.float64)
        store.apply([batch([LOSS], np.zeros(n, np.int64), ts, ts - T0, seq=1)])
        readers = _Readers(store)  # transactions open and closing all the while
        try:
            assert _wal(store) > 0 and _in_memory_tables(store) > 0
            assert store.footprint.checkpoint()
            assert _wal(store) == 0 and _in_memory_tables(store) == 0
            assert not store.footprint.checkpoint()
        finally:
            assert readers.stop() > 0  # they read throughout, none was aborted
        (info,) = store.series("loss")
        assert store.raw(info.id)["value"].shape == (n,)
