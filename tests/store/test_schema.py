"""Schema versions: a file of any older version is migrated step by step and keeps its data;
the steps from an empty file make exactly the tables of a new store."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import numpy as np
import pytest

from stepwatch.model import Event, SeriesKey
from stepwatch.store import Head, Store, StoreError
from stepwatch.store._ingest import event_row
from stepwatch.store._records import GENESIS, chain
from stepwatch.store._schema import SCHEMA_VERSION, STEPS, upgrade

from .conftest import T0, batch

LOSS = SeriesKey("train.loss", (("node", "n0"), ("rank", "0"), ("run", "r1")))
_LABELS = '{"node":"n0","rank":"0","run":"r1"}'

#: What a store of each version held, written in that version's own tables and columns.
_ROWS: dict[int, list[tuple[str, list[object]]]] = {
    1: [
        ("INSERT INTO series VALUES (0, 0, 'train.loss', 'r1', 'n0', '0', NULL, ?)", [_LABELS]),
        ("INSERT INTO samples SELECT i, 0, ? + i, i, 1.0 / (i + 1) FROM range(100) t(i)", [T0]),
        ("INSERT INTO sources VALUES ('trainer-0', 7)", []),
        (
            "INSERT INTO runs VALUES ('r1', 'llm', 'first', '{}', 'running', ?, NULL, '{}', 100)",
            [T0],
        ),
        ("INSERT INTO events VALUES (?, 'log', 'hello', 'r1', '{\"run\":\"r1\"}', '{}')", [T0]),
    ],
    2: [("INSERT INTO source_owners VALUES ('trainer-0', 'admin')", [])],
}


_FIRING = {"id": "a1", "rule": "spike", "group": "g", "kind": "loss_spike", "state": "firing"}
_FIRING |= {"severity": "warning", "since": T0 + 2, "labels": {"run": "r1"}}


def _records() -> tuple[list[tuple[object, ...]], Head]:
    """Three chained records of the collector's, as version 2 introduced them, the last an
    alert that fires."""
    events = [Event(T0 + i, "audit", f"act {i}", {"run": "r1"}, {"i": i}) for i in range(2)]
    events.append(Event(T0 + 2, "alert", "loss spike", {"run": "r1"}, _FIRING))
    rows = [event_row(e) for e in events]
    table, head = chain(rows, Head(0, GENESIS))
    return [tuple(r.values()) for r in table.to_pylist()], head


def _at(path: Path, version: int) -> Head | None:
    """A file built through the steps up to ``version``, each version's rows written right
    after its step (the records at version 2); the head of its records (None before them)."""
    head = None
    with duckdb.connect(str(path)) as con:
        for v in range(1, version + 1):
            assert upgrade(con, v) == (v - 1, v)
            for sql, params in _ROWS.get(v, []):
                con.execute(sql, params)
            if v == 2:
                rows, head = _records()
                con.executemany(f"INSERT INTO records VALUES ({', '.join('?' * 9)})", rows)
    return head


def _shape(path: Path) -> list[tuple[object, ...]]:
    """Every column, constraint and index of a closed store file."""
    with duckdb.connect(str(path)) as con:
        columns = con.execute(
            "SELECT table_name, column_index, column_name, data_type, is_nullable, "
            "column_default FROM duckdb_columns() WHERE database_name = current_database() "
            "ORDER BY ALL"
        ).fetchall()
        constraints = con.execute(
            "SELECT table_name, constraint_type, constraint_text FROM duckdb_constraints() "
            "WHERE database_name = current_database() ORDER BY ALL"
        ).fetchall()
        indexes = con.execute(
            "SELECT table_name, index_name, sql FROM duckdb_indexes() "
            "WHERE database_name = current_database() ORDER BY ALL"
        ).fetchall()
    return columns + constraints + indexes


def _version(path: Path) -> int:
    with duckdb.connect(str(path)) as con:
        ((value,),) = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchall()
    return int(value)


def test_the_version_is_the_number_of_steps(store: Store) -> None:
    store.close()
    assert SCHEMA_VERSION == len(STEPS) >= 2
    assert _version(store.path) == SCHEMA_VERSION


@pytest.mark.parametrize("old", range(1, SCHEMA_VERSION))
def test_an_older_store_is_migrated_to_the_tables_of_a_new_one(tmp_path: Path, old: int) -> None:
    _at(tmp_path / "old.duckdb", old)
    with Store(tmp_path / "old.duckdb"), Store(tmp_path / "new.duckdb"):
        pass
    assert _version(tmp_path / "old.duckdb") == SCHEMA_VERSION
    assert _shape(tmp_path / "old.duckdb") == _shape(tmp_path / "new.duckdb")


@pytest.mark.parametrize("old", range(1, SCHEMA_VERSION))
def test_a_migrated_store_keeps_its_data_and_answers(store_path: Path, old: int) -> None:
    head = _at(store_path, old)
    with Store(store_path) as store:
        (info,) = store.series("loss", {"run": "r1"})
        assert (info.id, info.key) == (0, LOSS)
        raw = store.raw(info.id)
        np.testing.assert_array_equal(raw["value"], 1.0 / np.arange(1, 101))
        assert store.last_seq("trainer-0") == 7
        run = store.get_run("r1")
        assert run is not None and (run.project, run.planned_total_steps) == ("llm", 100)
        assert [e.text for e in store.events(kind="log")] == ["hello"]
        if head is not None:
            assert store.owner_of("trainer-0") == "admin"
            assert store.record_head() == head
            assert store.verify_records().problem is None
            assert [a.id for a in store.current.open_alerts()] == ["a1"]  # folded from records
        store.apply([batch([LOSS], [0], [T0 + 100], [0.5], source="trainer-0", seq=8)])
        store.compact()
        (got,) = store.downsample_many("loss", {"run": "r1"}, T0, T0 + 200, 10, ["count"])
        assert got[1]["count"].sum() == 101


def test_a_migration_says_so_in_the_log_once(
    store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _at(store_path, SCHEMA_VERSION - 1)
    with caplog.at_level(logging.INFO, "stepwatch.store"):
        with Store(store_path):
            pass
        with Store(store_path):
            pass
    said = [r.getMessage() for r in caplog.records if r.name == "stepwatch.store"]
    assert said == [
        f"store {store_path}: schema migrated from version {SCHEMA_VERSION - 1} to {SCHEMA_VERSION}"
    ]


def test_a_step_that_fails_leaves_the_file_whole_at_the_version_before(store_path: Path) -> None:
    def broken(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("CREATE TABLE half_done (x INTEGER)")
        con.execute("ALTER TABLE samples ADD COLUMN half BIGINT")
        raise duckdb.ConstraintException("the step fails halfway")

    _at(store_path, 1)
    before = _shape(store_path)
    with duckdb.connect(str(store_path)) as con, pytest.raises(duckdb.Error, match="halfway"):
        upgrade(con, 2, (STEPS[0], broken))
    assert _version(store_path) == 1
    assert _shape(store_path) == before
    with Store(store_path) as store:  # and the real steps still take it the rest of the way
        assert store.last_seq("trainer-0") == 7


def test_a_store_newer_than_the_code_is_refused_untouched(store_path: Path) -> None:
    with Store(store_path):
        pass
    with duckdb.connect(str(store_path)) as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema'", [SCHEMA_VERSION + 1])
    before = _shape(store_path)
    newer = f"version {SCHEMA_VERSION + 1}, this code reads {SCHEMA_VERSION}: open it with a newer"
    with pytest.raises(StoreError, match=newer):
        Store(store_path)
    assert _shape(store_path) == before and _version(store_path) == SCHEMA_VERSION + 1


def test_a_file_with_tables_but_no_version_is_refused(store_path: Path) -> None:
    with duckdb.connect(str(store_path)) as con:
        con.execute("CREATE TABLE someone_elses (x INTEGER)")
    with pytest.raises(StoreError, match="not a stepwatch store"):
        Store(store_path)
