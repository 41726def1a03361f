"""Opening a store file: state survives a reopen; locked, corrupt or doubly opened files say so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

import stepwatch.store
from stepwatch.model import Event, Run, SeriesKey
from stepwatch.store import Store, StoreError

from .conftest import T0, FakeClock, batch

KEYS = [SeriesKey.of("loss", {"run": "r1"}), SeriesKey.of("gpu.util_pct", {"node": "n0", "gpu": 1})]


def test_public_api() -> None:
    assert stepwatch.store.__all__ == [
        "DEFAULT_RETENTION",
        "MAX_ANALYSIS_CHARS",
        "MAX_PROFILE_BYTES",
        "OPEN_STATES",
        "ActionQuery",
        "AlertQuery",
        "AlertRow",
        "AlertStates",
        "AuditQuery",
        "ChainCheck",
        "Checkpoint",
        "CurrentState",
        "DiskCap",
        "Forecasts",
        "Head",
        "Kept",
        "LabelMatch",
        "LogHit",
        "Page",
        "Position",
        "ProfileInfo",
        "Pruned",
        "Retention",
        "RunSummary",
        "SeriesInfo",
        "Space",
        "Store",
        "StoreError",
        "StoredAnalysis",
        "StoredForecast",
        "StoredLaw",
        "TokenRecord",
        "every",
    ]


def test_everything_is_still_there_after_a_reopen(store_path: Path, clock: FakeClock) -> None:
    rng = np.random.default_rng(1)
    ts = T0 + np.sort(rng.uniform(0, 5000, 4000))
    series = rng.integers(0, 2, 4000)
    with Store(store_path, clock=clock) as store:
        store.apply([batch(KEYS, series[:3000], ts[:3000], ts[:3000], source="a", seq=7)])
        store.compact()
        store.apply([batch(KEYS, series[3000:], ts[3000:], ts[3000:], source="b", seq=2)])
        store.apply([batch([], [], [], [], source="c", seq=0, events=[Event(T0, "log", "hi")])])
        store.upsert_run(Run("r1", start=T0))
        before = [store.downsample(i.id, T0, T0 + 5000, 50) for i in store.series()]
        stats = store.stats()
    with Store(store_path, clock=clock) as store:
        assert [i.key for i in store.series()] == KEYS
        assert (store.last_seq("a"), store.last_seq("b"), store.last_seq("c")) == (7, 2, 0)
        assert store.get_run("r1") == Run("r1", start=T0)
        assert store.events() == [Event(T0, "log", "hi")]
        same = {"file_bytes": 0, "resident_series": 0}  # a run's series: read back when written
        assert {**store.stats(), **same} == {**stats, **same}
        for info, old in zip(store.series(), before, strict=True):
            _assert_same(store.downsample(info.id, T0, T0 + 5000, 50), old)
        late = batch(KEYS, [0, 1], [T0 + 1, T0 + 2], [-5.0, -6.0], source="a", seq=8)
        assert store.apply([batch(KEYS, [0], [T0], [0.0], source="a", seq=7), late]) == [
            False,
            True,
        ]
        store.compact()
        assert [store.downsample(i.id, T0, T0 + 5000, 1)["min"][0] for i in store.series()] == [
            -5,
            -6,
        ]
        assert store.stats()["samples"] == stats["samples"] + 2


def _assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_a_second_store_on_the_same_file_in_this_process_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="already open"):
        Store(store.path)
    store.close()
    with Store(store.path) as again:
        assert again.series() == []


def test_a_file_locked_by_another_process_is_a_store_error(store_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(store_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"open\n"
        with pytest.raises(StoreError, match="another process"):
            Store(store_path)
    finally:
        holder.communicate(b"")
    with Store(store_path) as store:  # usable again once the other process has gone
        assert store.stats()["samples"] == 0


_HOLD = "; ".join(
    [
        "import duckdb, sys",
        "c = duckdb.connect(sys.argv[1])",
        "print('open', flush=True)",
        "sys.stdin.read()",
    ]
)


def test_a_corrupt_file_is_a_store_error(store_path: Path) -> None:
    store_path.write_bytes(b"this is not a database" * 1000)
    with pytest.raises(StoreError, match="cannot"):
        Store(store_path)
    with pytest.raises(StoreError):  # and the failed open left nothing registered behind
        Store(store_path)


def test_a_file_of_another_schema_version_is_a_store_error(store_path: Path) -> None:
    with Store(store_path):
        pass
    with duckdb.connect(str(store_path)) as con:
        con.execute("UPDATE meta SET value = 99 WHERE key = 'schema'")
    with pytest.raises(StoreError, match="version 99"):
        Store(store_path)


def test_a_closed_store_refuses_work(store: Store) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.stats()
