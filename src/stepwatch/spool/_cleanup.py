"""Delivered spools are deleted, so a node that has run thousands of runs does not keep
thousands of empty spool directories.

A spool directory goes only while its lock is held by whoever deletes it (its writer closing,
or the shipper of an orphan), so one still being written is never touched; and only when
everything in it was delivered: nothing unsent, no ``rejected/`` batches (kept for people to
read), no file the spool did not write. A run's directory goes with its last spool.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ._lock import LOCK_FILE, SpoolLock
from ._meta import RUN_FILE
from ._spool import _SEGMENT_RE, ACKED_FILE, has_unsent

__all__ = ["remove_delivered", "remove_run_dir", "sweep_run"]

log = logging.getLogger("stepwatch.spool")


def _spool_file(name: str) -> bool:
    return bool(_SEGMENT_RE.match(name)) or name == ACKED_FILE or name.endswith(".tmp")


def remove_delivered(spool_dir: Path, lock: SpoolLock) -> bool:
    """Delete ``spool_dir`` if everything in it was delivered; ``lock`` is its lock, held by
    the caller (released here when the directory goes). False: kept, nothing deleted."""
    try:
        names = [p.name for p in spool_dir.iterdir()]
        if has_unsent(spool_dir) or not all(_spool_file(n) or n == LOCK_FILE for n in names):
            return False
        for name in names:
            if name != LOCK_FILE:
                (spool_dir / name).unlink(missing_ok=True)
        (spool_dir / LOCK_FILE).unlink(missing_ok=True)
        lock.release()
        spool_dir.rmdir()
    except OSError as exc:  # a file appeared, or not ours to delete: it stays
        log.debug("stepwatch: spool %s kept: %s", spool_dir, exc)
        return False
    return True


def remove_run_dir(run_dir: Path) -> bool:
    """Delete a run's directory once no spool is left in it (its run file with it)."""
    try:
        if any(p.is_dir() for p in run_dir.iterdir()):
            return False
        (run_dir / RUN_FILE).unlink(missing_ok=True)
        run_dir.rmdir()
    except OSError as exc:
        log.debug("stepwatch: run directory %s kept: %s", run_dir, exc)
        return False
    return True


def sweep_run(run_dir: Path) -> bool:
    """Delete every delivered spool of ``run_dir`` nobody holds, then the directory when
    none is left; True when it is gone."""
    try:
        spool_dirs = [d for d in run_dir.iterdir() if d.is_dir()]
    except FileNotFoundError:
        return True
    for spool_dir in spool_dirs:
        try:
            lock = SpoolLock.take(spool_dir)
        except OSError:  # gone meanwhile, or not ours
            continue
        if lock is not None:  # else its writer (or another shipper) has it
            with lock:
                remove_delivered(spool_dir, lock)
    return remove_run_dir(run_dir)
