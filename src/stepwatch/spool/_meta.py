"""``run.json``: the run's metadata beside its spool, so an offline spool can be synced later."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..model import Run, RunStatus
from ._files import atomic_write
from ._seal import Sealer, SpoolKeyError, unseal

__all__ = ["NODE_SPOOL", "RUN_FILE", "finish_payload", "read_run", "run_payload", "write_run"]

RUN_FILE = "run.json"
#: Spool root subdirectory of producers outside any run (a standalone node agent).
NODE_SPOOL = "_node"
_FIELDS = {f.name for f in dataclasses.fields(Run)}


def write_run(run_dir: Path, run: Run, sealer: Sealer | None = None) -> None:
    """Atomically (re)write ``run_dir/run.json``, sealed with ``sealer`` when given (its name,
    project, config and labels are as telling as the samples)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(run.as_dict(), indent=1, default=str).encode()
    atomic_write(run_dir / RUN_FILE, sealer.seal(text) if sealer else text)


def read_run(run_dir: Path, sealer: Sealer | None = None) -> Run:
    """The run recorded in ``run_dir``; a missing or damaged file yields a bare run of that name.

    SpoolKeyError when the file is sealed and ``sealer`` cannot open it.
    """
    try:
        data = (run_dir / RUN_FILE).read_bytes()
    except OSError:
        data = b"{}"
    try:
        doc = json.loads(unseal(data, sealer, run_dir))
    except SpoolKeyError:
        raise
    except ValueError:
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
