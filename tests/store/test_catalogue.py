"""The series catalogue: memory holds the series of the runs written to lately, not of every
run ever stored; a commit's cost is its own series; a run let go is read back from the table
with the same ids; readers on other threads see every series whole while the writer adds more."""

from __future__ import annotations

import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

from stepwatch.model import Run, RunStatus, SeriesKey
from stepwatch.store import Store
from stepwatch.store._catalogue import Catalogue
from stepwatch.store._ingest import SERIES_SCHEMA, prepare, rows_table
from stepwatch.store._records import GENESIS, Head

from .conftest import T0, batch

SMALL, LARGE = 1_000, 100_000


def _keys(first: int, last: int) -> list[SeriesKey]:
    """GPU series of runs of 8 nodes × 8 GPUs: a histogram group per run and node."""
    return [
        SeriesKey.of("gpu.util_pct", {"run": f"r{i // 64}", "node": f"n{i // 8 % 8}", "gpu": i % 8})
        for i in range(first, last)
    ]


def _fill(store: Store, keys: list[SeriesKey], seq: int = 1) -> None:
    n = len(keys)
    store.apply([batch(keys, range(n), np.full(n, T0 + seq), np.ones(n), seq=seq)])


@pytest.fixture
def con(store_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A store file's connection, for a catalogue of the test's own."""
    Store(store_path).close()
    with duckdb.connect(str(store_path)) as connection:
        yield connection


def _catalogue(con: duckdb.DuckDBPyConnection, size: int, resident: int = LARGE) -> Catalogue:
    """A catalogue of ``size`` series, written to the table as a commit would."""
    cat = Catalogue.load(con, resident)
    _insert(con, cat, _keys(0, size))
    return cat


def _insert(con: duckdb.DuckDBPyConnection, cat: Catalogue, keys: list[SeriesKey]) -> None:
    """Register ``keys`` and commit the new ones as the store does."""
    new = cat.register(con, keys)
    rows = rows_table(new.rows(), SERIES_SCHEMA)  # noqa: F841  # read by the query below
    con.execute("INSERT INTO series SELECT * FROM rows")
    cat.add(new)


def _peak_bytes(work: Callable[[], object]) -> int:
    """The most Python memory ``work`` held at once beyond what there was before."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _commit(size: int) -> list[SeriesKey]:
    """A commit's keys: 64 series already known and 16 new ones (two new groups)."""
    return _keys(size - 64, size) + _keys(size, size + 16)


def test_registering_numbers_only_the_new_series_after_the_known_ones(
    con: duckdb.DuckDBPyConnection,
) -> None:
    cat = _catalogue(con, SMALL)
    new = cat.register(con, _commit(SMALL) + _keys(SMALL, SMALL + 4))  # repeats count once
    assert [(sid, key) for sid, _, key in new.entries] == list(
        enumerate(_keys(SMALL, SMALL + 16), start=SMALL)
    )
    assert {grp for _, grp, _ in new.entries} == {SMALL // 8, SMALL // 8 + 1}
    assert new.ids == {k: i for i, k in enumerate(_keys(SMALL - 64, SMALL + 16), SMALL - 64)}
    assert len(cat) == SMALL  # not yet committed
    assert cat.register(con, _keys(0, 64)).entries == []


def test_registering_a_commit_costs_the_same_with_a_hundred_times_the_series(
    con: duckdb.DuckDBPyConnection,
) -> None:
    peak = {}
    for size in (SMALL, LARGE):
        con.execute("DELETE FROM series")
        cat, keys = _catalogue(con, size), _commit(size)
        peak[size] = _peak_bytes(lambda cat=cat, keys=keys: cat.register(con, keys))
    assert peak[LARGE] <= 1.5 * peak[SMALL]


def test_preparing_a_commit_costs_the_same_with_a_hundred_times_the_series(
    con: duckdb.DuckDBPyConnection,
) -> None:
    peak = {}
    for size in (SMALL, LARGE):
        con.execute("DELETE FROM series")
        cat, keys = _catalogue(con, size), _commit(size)
        series = np.arange(len(keys), dtype=np.uint32)
        sent = [batch(keys, series, np.full(len(keys), T0), np.ones(len(keys)))]
        peak[size] = _peak_bytes(
            lambda cat=cat, sent=sent: prepare(sent, cat, con, {}, 0, 0, Head(0, GENESIS))
        )
    assert peak[LARGE] <= 1.5 * peak[SMALL]


def test_memory_holds_no_series_of_an_ended_run_and_a_query_still_finds_them(
    store: Store,
) -> None:
    _fill(store, _keys(0, 128))  # runs r0 and r1
    assert store._cat.resident() == (2, 128)
    store.upsert_run(Run("r0", "p", "r0", {}, RunStatus.RUNNING, T0))
    store.finish_run("r0", RunStatus.FINISHED)
    assert store._cat.resident() == (1, 64)
    found = store.series("gpu.util_pct", {"run": "r0", "node": "n2"})
    assert [i.key for i in found] == _keys(16, 24)
    assert store.series_info(found[0].id) == found[0]
    assert store.series_info(10**9) is None
    store.upsert_run(Run("r1", "p", "r1", {}, RunStatus.FAILED, T0))
    assert store._cat.resident() == (0, 0)


def test_a_run_written_to_again_keeps_its_ids_and_gains_new_series_after_every_other(
    store: Store,
) -> None:
    _fill(store, _keys(0, 64))
    before = {i.key: i.id for i in store.series(None, {"run": "r0"})}
    store.upsert_run(Run("r0", "p", "r0", {}, RunStatus.FINISHED, T0))
    _fill(store, _keys(64, 128), seq=2)  # another run meanwhile
    extra = SeriesKey.of("gpu.temp_c", {"run": "r0", "node": "n0", "gpu": 0})
    _fill(store, [*_keys(0, 8), extra], seq=3)  # late samples of r0, and a series it lacked
    after = {i.key: i.id for i in store.series(None, {"run": "r0"})}
    assert {k: after[k] for k in before} == before
    assert after[extra] == 128
    assert store.stats()["series"] == 129
    assert len(store.raw(before[_keys(0, 1)[0]])["ts"]) == 2


def test_memory_lets_the_runs_written_to_least_lately_go_beyond_its_bound(
    con: duckdb.DuckDBPyConnection,
) -> None:
    cat = _catalogue(con, 640, resident=200)  # ten runs of 64 series
    assert cat.resident() == (3, 192)  # the three written last
    again = cat.register(con, _keys(0, 64))  # the first run, read back from the table
    assert again.entries == [] and again.ids == {k: i for i, k in enumerate(_keys(0, 64))}
    cat.add(again)
    assert cat.resident() == (3, 192)


@pytest.mark.parametrize(
    ("name", "match"),
    [
        (None, {"run": "r7"}),
        ("gpu.util_pct", {"run": "r7", "node": "n2"}),
        ("loss", {"run": "r7"}),  # an alias
        ("gpu.temp_c", {"run": "r7"}),
        (None, {"run": frozenset({"r1", "r50", "r3"})}),
        ("gpu.util_pct", {"node": "n2", "gpu": "3"}),
        (None, None),
        ("gpu.util_pct", {"run": "nope"}),
    ],
)
def test_a_query_finds_the_same_series_from_memory_and_from_the_table(
    con: duckdb.DuckDBPyConnection, name: str | None, match: dict[str, object] | None
) -> None:
    cat = _catalogue(con, SMALL)
    temps = [SeriesKey("gpu.temp_c", k.labels) for k in _keys(7 * 64, 7 * 64 + 16)]
    _insert(con, cat, temps)
    every = _keys(0, SMALL) + temps
    wanted = {k: v if isinstance(v, frozenset) else {v} for k, v in (match or {}).items()}
    expected = [
        sid
        for sid, key in enumerate(every)
        if (name is None or key.name == {"loss": "train.loss"}.get(name, name))
        and all(key.label(k) in v for k, v in wanted.items())
    ]
    in_memory = [i.id for i in cat.select(con, name, match)]  # type: ignore[arg-type]
    for run in [f"r{i}" for i in range(SMALL // 64 + 1)]:
        cat.forget(run)
    assert cat.resident() == (0, 0)
    from_table = [i.id for i in cat.select(con, name, match)]  # type: ignore[arg-type]
    assert in_memory == from_table == expected


def test_groups_count_the_series_of_each(con: duckdb.DuckDBPyConnection) -> None:
    cat = _catalogue(con, 256)
    grp_of, size = cat.groups_of(con, [0, 7, 8, 200])
    assert grp_of == {0: 0, 7: 0, 8: 1, 200: 25}
    assert size == {0: 8, 1: 8, 25: 8}


def test_readers_see_every_series_whole_while_new_ones_commit(store: Store) -> None:
    failures: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            for seq in range(40):
                keys = _keys(seq * 16, seq * 16 + 16)
                store.apply([batch(keys, range(16), [T0 + seq] * 16, [1.0] * 16, seq=seq)])
                if seq % 8 == 7:  # a run ends every 128 series: memory lets it go
                    store.upsert_run(Run(f"r{seq // 4}", "p", "r", {}, RunStatus.FINISHED, T0))
        except BaseException as e:  # handed to the test thread
            failures.append(e)
        finally:
            done.set()

    writer = threading.Thread(target=write, name="store-writer")
    writer.start()
    counts: dict[str, list[int]] = {"all": [], "by name": [], "by run": []}
    while not done.is_set():
        for query, seen in counts.items():
            match = {"run": "r3"} if query == "by run" else None
            found = store.series(None if query == "all" else "gpu.util_pct", match)
            assert [i.id for i in found] == sorted(i.id for i in found)
            assert all(_keys(i.id, i.id + 1) == [i.key] for i in found)
            seen.append(len(found))
        time.sleep(0.001)  # let the writer run
    writer.join()
    assert not failures
    assert all(seen == sorted(seen) for seen in counts.values())
