"""`stepwatch audit` shows the head of the records' hash chain; `stepwatch audit verify` re-computes
the chain of a store file and names the first record edited, removed or reordered with duckdb."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from click.testing import CliRunner, Result

from stepwatch.cli import main


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})


@pytest.fixture(scope="module")
def audited(module_collector_factory: Any) -> tuple[Any, str]:
    """A stopped collector's store with five audit records (commands to a run), and the head
    line ``stepwatch audit`` printed while it ran."""
    collector = module_collector_factory()
    httpx.post(f"{collector.url}/api/v1/runs", json={"id": "r1"}).raise_for_status()
    for i in range(5):
        body = {"action": "checkpoint", "by": "ops", "reason": f"number {i}"}
        httpx.post(f"{collector.url}/api/v1/runs/r1/commands", json=body).raise_for_status()
    shown = _cli("audit", "--server", collector.url)
    assert shown.exit_code == 0, shown.output
    head = httpx.get(f"{collector.url}/api/v1/audit/head").json()
    line = shown.output.splitlines()[-1]
    assert line == f"chain head: record {head['seq']} sha256 {head['hash']}"
    collector.stop()
    return collector, line


@pytest.fixture
def store(audited: tuple[Any, str], tmp_path: Path) -> Path:
    """A copy of the audited store, for one test to edit."""
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(audited[0].store_path.read_bytes())
    return copy


def _audit_seqs(store: Path) -> list[int]:
    with duckdb.connect(str(store)) as con:
        rows = con.execute("SELECT seq FROM records WHERE kind = 'audit' ORDER BY seq").fetchall()
    return [int(seq) for (seq,) in rows]


def test_an_intact_store_verifies_and_leads_to_the_head_audit_showed(
    audited: tuple[Any, str], store: Path
) -> None:
    result = _cli("audit", "verify", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == audited[1]


def test_an_edited_audit_record_is_named(store: Path) -> None:
    seq = _audit_seqs(store)[1]
    with duckdb.connect(str(store)) as con:
        con.execute("UPDATE records SET data = replace(data, 'ops', 'nobody') WHERE seq = ?", [seq])
    result = _cli("audit", "verify", "--store", str(store))
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {store}: record {seq} (audit) was changed: its content does not match its hash\n"
    )


def test_a_removed_audit_record_is_named(store: Path) -> None:
    seq = _audit_seqs(store)[2]
    with duckdb.connect(str(store)) as con:
        con.execute("DELETE FROM records WHERE seq = ?", [seq])
    result = _cli("audit", "verify", "--store", str(store))
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {store}: record {seq} was removed")


def test_two_swapped_audit_records_are_named(store: Path) -> None:
    first, second = _audit_seqs(store)[:2]
    with duckdb.connect(str(store)) as con:
        con.execute(
            "UPDATE records SET seq = CASE seq WHEN ? THEN ? ELSE ? END WHERE seq IN (?, ?)",
            [first, second, first, first, second],
        )
    result = _cli("audit", "verify", "--store", str(store))
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {store}: record {first} is out of order")


def test_a_store_a_collector_holds_is_one_line_of_error(
    collector_factory: Any,
) -> None:
    collector = collector_factory()
    result = _cli("audit", "verify", "--store", str(collector.store_path))
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith("Error: ") and "in use by another process" in line
