"""Where a run's identity comes from: arguments first, then the environment a launcher set."""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .._encryption import EncryptionKey, resolve_key
from .._tls import ClientTls
from ..model import validate_label

__all__ = ["Settings", "new_source_id", "resolve"]

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

#: Launcher variables (torchrun, `stepwatch run`) and the labels they become.
_ENV_LABELS = {"RANK": "rank", "LOCAL_RANK": "local_rank", "WORLD_SIZE": "world_size"}


@dataclass(frozen=True, slots=True)
class Settings:
    """What init() resolved: the run id, where and how to send, where to spool, the labels,
    the key that seals the spool (None: plain)."""

    run_id: str
    server: str | None
    token: str | None
    root: Path
    labels: dict[str, str]
    tls: ClientTls
    key: EncryptionKey | None = None


def _run_id(given: str | None, environ: Mapping[str, str], wall: Callable[[], float]) -> str:
    run_id = given or environ.get("STEPWATCH_RUN_ID")
    if not run_id:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(wall()))
        return f"{stamp}-{uuid.uuid4().hex[:6]}"
    if not _RUN_ID_RE.match(run_id):
        raise ValueError(f"invalid run id {run_id!r}: use up to 128 of A-Z a-z 0-9 _ . -")
    return run_id


def _labels(
    given: Mapping[str, object] | None, environ: Mapping[str, str], hostname: str, run_id: str
) -> dict[str, str]:
    merged: dict[str, object] = {"node": hostname}
    merged.update({label: environ[var] for var, label in _ENV_LABELS.items() if var in environ})
    merged.update(given or {})
    merged["run"] = run_id
    return {k: validate_label(k, v) for k, v in merged.items()}


def resolve(
    *,
    run_id: str | None,
    server: str | None,
    dir: str | os.PathLike[str] | None,
    labels: Mapping[str, object] | None,
    token: str | None,
    environ: Mapping[str, str],
    hostname: str,
    wall: Callable[[], float],
    tls: ClientTls | None = None,
) -> Settings:
    """Resolve init()'s arguments against the environment (read now, never at import)."""
    rid = _run_id(run_id, environ, wall)
    root = dir or environ.get("STEPWATCH_DIR") or Path.home() / ".stepwatch" / "spool"
    return Settings(
        run_id=rid,
        server=server or environ.get("STEPWATCH_SERVER") or None,
        token=token or environ.get("STEPWATCH_TOKEN") or None,
        root=Path(root).expanduser(),
        labels=_labels(labels, environ, hostname, rid),
        key=resolve_key(None, environ),
        tls=tls or ClientTls.from_env(environ),
    )


def new_source_id(pid: int) -> str:
    """A source id unique to one Run object (the collector deduplicates by source and seq)."""
    return f"sdk-{pid}-{uuid.uuid4().hex[:12]}"
