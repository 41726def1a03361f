"""Profiler traces kept with their run, rank and steps: a few per run, a bounded total."""

from __future__ import annotations

import threading
from pathlib import Path

from stepwatch.store import Store
from stepwatch.store._profiles import Profiles


def test_traces_are_kept_listed_newest_first_and_read_back(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        first = store.profiles.put("r1", "0", 10, 5, 100.0, b"one")
        second = store.profiles.put("r1", "1", None, 3, 200.0, b"two")
        store.profiles.put("r2", "0", 0, 1, 150.0, b"other run")
        assert [p.id for p in store.profiles.of_run("r1")] == [second.id, first.id]
        assert store.profiles.of_run("r1")[1].as_dict() == {
            "id": first.id, "run": "r1", "rank": "0", "first_step": 10, "steps": 5,
            "ts": 100.0, "bytes": 3,
        }  # fmt: skip
        assert store.profiles.trace("r1", first.id) == b"one"
        assert store.profiles.trace("r2", first.id) is None  # another run's id: none
    with Store(tmp_path / "s.duckdb") as store:  # kept across a reopen
        assert store.profiles.trace("r1", second.id) == b"two"


def test_a_run_keeps_its_newest_and_all_stay_within_their_bytes(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        profiles = Profiles(threading.RLock(), store._txn, per_run=3, max_total_bytes=100)
        made = [profiles.put("r1", "0", i, 1, float(i), b"x" * 10) for i in range(5)]
        assert [p.id for p in profiles.of_run("r1")] == [p.id for p in made[:1:-1]]
        big = profiles.put("r2", "0", 0, 1, 10.0, b"y" * 80)
        assert [p.id for p in profiles.of_run("r2")] == [big.id]
        assert [p.id for p in profiles.of_run("r1")] == [made[4].id, made[3].id]  # 100 bytes
