"""The collector's records: a table apart from ingested events, and its hash chain."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pytest

from stepwatch.model import RECORD_KINDS, Event, RecordBatch
from stepwatch.store import Head, Store, StoreError

from .conftest import T0, batch

SOURCE = "stepwatch.collector"


def _records(n: int) -> list[RecordBatch]:
    """``n`` audit records, one batch each, as the collector's event log writes them."""
    return [
        RecordBatch.of(SOURCE, [Event(T0 + i, "audit", f"act {i}", {"run": "r1"}, {"i": i})])
        for i in range(n)
    ]


def _edit(path: Path, sql: str) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute(sql)


def _verify(path: Path) -> str | None:
    with Store(path) as store:
        return store.verify_records().problem


@pytest.fixture
def chained(store_path: Path) -> Path:
    """A store file holding five chained records."""
    with Store(store_path) as store:
        assert store.apply(_records(5)) == [True] * 5
    return store_path


def test_records_and_ingested_events_are_kept_apart(store: Store) -> None:
    ingested = Event(T0, "checkpoint", "saved", {"run": "r1"}, {"step": 1})
    (record,) = _records(1)
    assert store.apply([batch([], [], [], [], events=[ingested]), record]) == [True, True]
    assert store.events() == [ingested]
    assert store.records() == record.events
    assert store.records(kind="checkpoint") == [] and store.events(kind="audit") == []
    assert (store.stats()["events"], store.stats()["records"]) == (1, 1)


def test_records_are_always_applied_and_never_claim_a_source_seq(store: Store) -> None:
    first, second = _records(2)
    assert store.apply([first]) == [True] and store.apply([second]) == [True]
    assert [e.text for e in store.records()] == ["act 0", "act 1"]
    assert store.last_seq(SOURCE) is None


@pytest.mark.parametrize("kind", sorted(RECORD_KINDS))
def test_a_reserved_kind_in_an_ingested_batch_stores_nothing(store: Store, kind: str) -> None:
    good = batch([], [], [], [], source="good", seq=1)
    forged = batch([], [], [], [], source="trainer", seq=1, events=[Event(T0, kind, "x")])
    with pytest.raises(ValueError, match=f"kind '{kind}' is reserved"):
        store.apply([good, forged])
    assert (store.events(), store.records(), store.last_seq("good")) == ([], [], None)


def test_the_collector_s_source_cannot_be_claimed_by_a_sample_batch(store: Store) -> None:
    with pytest.raises(ValueError, match="source 'stepwatch.collector' is reserved"):
        store.apply([batch([], [], [], [], source=SOURCE, seq=10**18)])
    assert store.last_seq(SOURCE) is None


def test_the_chain_continues_after_a_reopen(chained: Path) -> None:
    with Store(chained) as store:
        store.apply(_records(1))
        check = store.verify_records()
        assert (check.problem, check.records, store.record_head()) == (None, 6, check.head)


def test_an_intact_chain_has_no_problem(chained: Path) -> None:
    assert _verify(chained) is None


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        (
            "UPDATE records SET data = '{\"i\": 99}' WHERE seq = 3",
            "record 3 (audit) was changed: its content does not match its hash",
        ),
        (
            "UPDATE records SET ts = ts + 1 WHERE seq = 5",
            "record 5 (audit) was changed: its content does not match its hash",
        ),
        ("DELETE FROM records WHERE seq = 3", "record 3 was removed"),
        ("DELETE FROM records WHERE seq IN (2, 3)", "records 2 to 3 were removed"),
        ("DELETE FROM records WHERE seq = 1", "record 1 was removed"),
        (
            "UPDATE records SET seq = CASE seq WHEN 2 THEN 4 WHEN 4 THEN 2 END WHERE seq IN (2, 4)",
            "record 2 is out of order: it was written after record 3",
        ),
        (
            "UPDATE records SET seq = CASE seq WHEN 1 THEN 2 WHEN 2 THEN 1 END WHERE seq IN (1, 2)",
            "record 1 is out of order: it was written after record 2",
        ),
        ("UPDATE records SET seq = 9 WHERE seq = 5", "record 9 was renumbered"),
    ],
)
def test_verify_names_the_first_record_changed_removed_or_reordered(
    chained: Path, sql: str, problem: str
) -> None:
    _edit(chained, sql)
    found = _verify(chained)
    assert found is not None and found.startswith(problem), found


def _sha256(row: tuple[object, ...]) -> str:
    """A record's hash as the canonical encoding defines it, from its stored columns."""
    seq, ts, kind, text, run, labels, data, prev = row
    doc = {"data": data, "kind": kind, "labels": labels, "prev": prev, "run": run}
    doc |= {"seq": seq, "text": text, "ts": ts}
    return hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def test_each_record_carries_the_sha256_of_the_one_before(chained: Path) -> None:
    with duckdb.connect(str(chained)) as con:
        rows = con.execute(
            "SELECT seq, ts, kind, text, run, labels, data, prev, hash FROM records ORDER BY seq"
        ).fetchall()
    prev = "0" * 64
    for *fields, stored_prev, digest in rows:
        assert (stored_prev, digest) == (prev, _sha256((*fields, prev)))
        prev = digest
    with Store(chained) as store:
        assert store.record_head() == Head(5, prev)
        assert store.verify_records().head == Head(5, prev)


def test_a_record_changed_and_rehashed_breaks_the_link_of_the_next(chained: Path) -> None:
    with duckdb.connect(str(chained)) as con:
        ((*fields, prev),) = con.execute(
            "SELECT seq, ts, kind, text, run, labels, '{\"i\": 99}', prev FROM records "
            "WHERE seq = 2"
        ).fetchall()
        con.execute(
            "UPDATE records SET data = ?, hash = ? WHERE seq = 2",
            [fields[-1], _sha256((*fields, prev))],
        )
    assert _verify(chained) == "record 2 was changed: record 3 does not follow from it"


def test_a_file_of_the_previous_schema_is_refused_untouched(store_path: Path) -> None:
    with Store(store_path):
        pass
    _edit(store_path, "DROP TABLE records; UPDATE meta SET value = 1 WHERE key = 'schema'")
    with pytest.raises(StoreError, match="version 1, this code reads 3"):
        Store(store_path)
    with duckdb.connect(str(store_path)) as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "records" not in tables
