"""Delivered spools are deleted, and only they: never one with unsent records, rejected batches
or a file the spool did not write, never one whose writer holds its lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepwatch.model import Run
from stepwatch.spool import (
    REJECTED_DIR,
    RUN_FILE,
    Spool,
    SpoolLock,
    remove_delivered,
    remove_run_dir,
    write_run,
)
from stepwatch.spool._cleanup import sweep_run


def _spool(run_dir: Path, source: str, records: int = 3, acked: bool = True) -> Path:
    """A closed spool of ``records`` records, all acknowledged when ``acked``."""
    with Spool(run_dir / source, segment_bytes=64) as spool:
        for i in range(records):
            spool.append(b"x" * 40 + bytes([i]))
        if acked:
            spool.ack(spool.written)
    return run_dir / source


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    write_run(tmp_path / "r1", Run(id="r1"))
    return tmp_path / "r1"


def test_a_delivered_spool_and_then_its_run_directory_go(run_dir: Path) -> None:
    first, second = _spool(run_dir, "rank0"), _spool(run_dir, "rank1")
    lock = SpoolLock.take(first)
    assert lock is not None
    assert remove_delivered(first, lock)
    assert not first.exists() and second.is_dir()
    assert not remove_run_dir(run_dir)  # rank1's spool is still there
    assert sorted(p.name for p in run_dir.iterdir()) == ["rank1", RUN_FILE]
    assert sweep_run(run_dir)
    assert not run_dir.exists()


def test_unsent_records_rejected_batches_or_foreign_files_keep_a_spool(run_dir: Path) -> None:
    unsent = _spool(run_dir, "unsent", acked=False)
    rejected = _spool(run_dir, "rejected")
    _spool(rejected, REJECTED_DIR)
    foreign = _spool(run_dir, "foreign")
    (foreign / "notes.txt").write_text("mine")
    assert not sweep_run(run_dir)
    assert sorted(p.name for p in run_dir.iterdir()) == ["foreign", "rejected", RUN_FILE, "unsent"]
    assert len(list(unsent.glob("*.seg"))) >= 1
    assert (rejected / REJECTED_DIR).is_dir() and (foreign / "notes.txt").read_text() == "mine"


def test_a_spool_whose_writer_holds_its_lock_is_never_deleted(run_dir: Path) -> None:
    held = _spool(run_dir, "live")
    writer = SpoolLock.take(held)
    assert writer is not None
    try:
        assert not sweep_run(run_dir)
        assert held.is_dir() and (run_dir / RUN_FILE).is_file()
    finally:
        writer.release()
    assert sweep_run(run_dir)
