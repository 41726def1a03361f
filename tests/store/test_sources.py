"""Per-source facts (last seq, owner) in memory for the recent sources only: dedup and ownership
stay exact for a source memory has let go of, and memory stays at its limit."""

from __future__ import annotations

from pathlib import Path

from stepwatch.model import SeriesKey
from stepwatch.store import Store

from .conftest import T0, batch

LOSS = SeriesKey.of("loss", {"run": "r1"})
LIMIT = 3


def _send(store: Store, source: str, seq: int) -> bool:
    (ok,) = store.apply([batch([LOSS], [0], [T0 + seq], [1.0], source=source, seq=seq)])
    return ok


def test_memory_holds_at_most_the_limit_and_dedup_holds_for_the_rest(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb", source_limit=LIMIT) as store:
        for i in range(20):
            assert _send(store, f"trainer-{i}", 5)
        assert len(store._sources.last_seqs) == LIMIT
        assert not _send(store, "trainer-0", 5)  # read back from the table: still a duplicate
        assert not _send(store, "trainer-1", 4)
        assert _send(store, "trainer-2", 6)
        assert [store.last_seq(f"trainer-{i}") for i in range(4)] == [5, 5, 6, 5]
        assert len(store._sources.last_seqs) == LIMIT


def test_an_evicted_source_keeps_its_owner_and_memory_its_limit(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb", source_limit=LIMIT) as store:
        for i in range(20):
            assert store.claim_source(f"sdk-{i}", f"user-{i}") == f"user-{i}"
        assert len(store._sources.owners) == LIMIT
        assert store.owner_of("sdk-0") is None  # not in memory: the caller claims
        assert store.claim_source("sdk-0", "mallory") == "user-0"
        assert store.owner_of("sdk-0") == "user-0"
        assert len(store._sources.owners) == LIMIT


def test_a_reopened_store_loads_no_more_than_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with Store(path) as store:
        for i in range(10):
            _send(store, f"trainer-{i}", 7)
            store.claim_source(f"trainer-{i}", "admin")
    with Store(path, source_limit=LIMIT) as store:
        assert (len(store._sources.last_seqs), len(store._sources.owners)) == (LIMIT, LIMIT)
        assert all(not _send(store, f"trainer-{i}", 7) for i in range(10))
        assert {store.claim_source(f"trainer-{i}", "x") for i in range(10)} == {"admin"}
