"""``run.json``: the run's metadata beside its spool, so an offline spool can be synced later."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..model import Run, RunStatus
from ._files import atomic_write

__all__ = ["NODE_SPOOL", "RUN_FILE", "finish_payload", "read_run", "run_payload", "write_run"]

RUN_FILE = "run.json"
#: Spool root subdirectory of producers outside any run (a standalone node agent).
NODE_SPOOL = "_node"
_FIELDS = {f.name for f in dataclasses.fields(Run)}


def write_run(run_dir: Path, run: Run) -> None:
    """Atomically (re)write ``run_dir/run.json``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(run.as_dict(), indent=1, default=str)
    atomic_write(run_dir / RUN_FILE, text.encode())


def read_run(run_dir: Path) -> Run:
    """The run recorded in ``run_dir``; a missing or damaged file yields a bare run of that name."""
    try:
        doc = json.loads((run_dir / RUN_FILE).read_bytes())
    except (OSError, ValueError):
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    fields = {k: v for k, v in doc.items() if k in _FIELDS}
    fields["id"] = str(fields.get("id") or run_dir.name)
    try:
        return Run(**fields)
    except TypeError:
        return Run(id=fields["id"])


def run_payload(run: Run) -> dict[str, Any]:
    """The body of ``POST /api/v1/runs``: every field the server takes, ``None`` left out."""
    doc = run.as_dict()
    doc.pop("end")
    return {k: v for k, v in doc.items() if v is not None}


def finish_payload(run: Run) -> dict[str, Any] | None:
    """The body of ``POST /api/v1/runs/{id}/finish``, or None while the run is still running."""
    if run.status == RunStatus.RUNNING:
        return None
    return {"status": run.status, "end": run.end}
