"""The series catalogue: a commit's cost is its own series, never the catalogue's, and readers
on other threads see every series whole while the writer adds more."""

from __future__ import annotations

import threading
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest

from stepwatch.model import SeriesKey
from stepwatch.store import Store
from stepwatch.store._catalogue import Catalogue, Dense
from stepwatch.store._ingest import prepare
from stepwatch.store._records import GENESIS, Head

from .conftest import T0, batch

SMALL, LARGE = 1_000, 100_000


def _keys(first: int, last: int) -> list[SeriesKey]:
    """GPU series of runs of 8 nodes × 8 GPUs: a histogram group per run and node."""
    return [
        SeriesKey.of("gpu.util_pct", {"run": f"r{i // 64}", "node": f"n{i // 8 % 8}", "gpu": i % 8})
        for i in range(first, last)
    ]


def _catalogue(size: int) -> Catalogue:
    cat = Catalogue()
    cat.add(cat.register(_keys(0, size)))
    return cat


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


def test_registering_numbers_only_the_new_series_after_the_known_ones() -> None:
    cat = _catalogue(SMALL)
    new = cat.register(_commit(SMALL) + _keys(SMALL, SMALL + 4))  # repeats count once
    assert [(sid, key) for sid, _, key in new.entries] == list(
        enumerate(_keys(SMALL, SMALL + 16), start=SMALL)
    )
    assert {grp for _, grp, _ in new.entries} == {len(cat.group_size), len(cat.group_size) + 1}
    assert len(cat) == SMALL and _keys(SMALL, SMALL + 1)[0] not in cat.ids  # not yet committed
    assert cat.register(_keys(0, 64)).entries == []


def test_a_commit_grows_the_catalogue_in_place() -> None:
    cat = _catalogue(SMALL)
    maps = [cat.ids, cat.keys, cat.grp_of, cat.groups, cat.group_size, cat.by_name]
    cat.add(cat.register(_commit(SMALL)))
    assert [id(m) for m in maps] == [
        id(m) for m in (cat.ids, cat.keys, cat.grp_of, cat.groups, cat.group_size, cat.by_name)
    ]
    assert len(cat) == SMALL + 16
    assert [i.key for i in cat.select("gpu.util_pct", {"run": f"r{SMALL // 64}"})][-16:] == (
        _keys(SMALL, SMALL + 16)
    )


def test_registering_a_commit_costs_the_same_with_a_hundred_times_the_series() -> None:
    peak = {}
    for size in (SMALL, LARGE):
        cat, keys = _catalogue(size), _commit(size)
        peak[size] = _peak_bytes(lambda cat=cat, keys=keys: cat.register(keys))
    assert peak[LARGE] <= 1.5 * peak[SMALL]


def test_preparing_a_commit_costs_the_same_with_a_hundred_times_the_series() -> None:
    peak = {}
    for size in (SMALL, LARGE):
        cat, keys = _catalogue(size), _commit(size)
        series = np.arange(len(keys), dtype=np.uint32)
        sent = [batch(keys, series, np.full(len(keys), T0), np.ones(len(keys)))]
        peak[size] = _peak_bytes(
            lambda cat=cat, sent=sent: prepare(sent, cat, {}, 0, 0, Head(0, GENESIS))
        )
    assert peak[LARGE] <= 1.5 * peak[SMALL]


def test_readers_see_every_series_whole_while_new_ones_commit(store: Store) -> None:
    failures: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            for seq in range(40):
                keys = _keys(seq * 16, seq * 16 + 16)
                store.apply([batch(keys, range(16), [T0 + seq] * 16, [1.0] * 16, seq=seq)])
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
            assert all(store._cat.keys[i.id] == i.key for i in found)
            seen.append(len(found))
        time.sleep(0.001)  # let the writer run
    writer.join()
    assert not failures
    assert all(seen == sorted(seen) for seen in counts.values())


class _Counted(Dense[SeriesKey]):
    """The catalogue's keys, counting how many a query looks at."""

    def __init__(self, keys: Dense[SeriesKey]) -> None:
        super().__init__()
        for sid in keys:
            self.append(keys[sid])
        self.looked = 0

    def __getitem__(self, i: int) -> SeriesKey:
        self.looked += 1
        return super().__getitem__(i)


def _brute(cat: Catalogue, name: str | None, match: dict[str, object]) -> list[int]:
    wanted = {k: v if isinstance(v, frozenset) else {v} for k, v in match.items()}
    return [
        sid
        for sid in range(len(cat))
        if name in (None, cat.keys[sid].name)
        and all(cat.keys[sid].label(k) in v for k, v in wanted.items())
    ]


@pytest.mark.parametrize(
    ("name", "match", "looked"),
    [
        (None, {"run": "r7"}, 80),
        ("gpu.util_pct", {"run": "r7", "node": "n2"}, 80),
        ("gpu.temp_c", {"run": "r7"}, 16),  # fewer of the name than of the run
        (None, {"run": frozenset({"r1", "r50"})}, 128),
        ("gpu.util_pct", {"node": "n2"}, SMALL * 4),
    ],
)
def test_a_query_about_a_run_looks_only_at_that_runs_series(
    name: str | None, match: dict[str, object], looked: int
) -> None:
    cat = _catalogue(SMALL * 4)
    temps = [SeriesKey("gpu.temp_c", k.labels) for k in _keys(7 * 64, 7 * 64 + 16)]
    cat.add(cat.register(temps))
    expected = _brute(cat, name, match)
    cat.keys = counted = _Counted(cat.keys)  # type: ignore[misc]
    found = cat.select(name, match)  # type: ignore[arg-type]
    assert counted.looked == looked
    assert [i.id for i in found] == expected and expected
