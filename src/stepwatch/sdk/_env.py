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
from .._sizes import parse_size
from .._tls import ClientTls
from ..model import validate_label
from ..spool import ENV_MAX_SPOOL, spool_cap

__all__ = ["Settings", "new_source_id", "resolve"]

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

#: Launcher variables (torchrun, `stepwatch run`) and the labels they become.
_ENV_LABELS = {"RANK": "rank", "LOCAL_RANK": "local_rank", "WORLD_SIZE": "world_size"}
#: Set to 0 (or false, no) to leave orphaned spools under the spool root to `stepwatch sync`.
ENV_SHIP_ORPHANS = "STEPWATCH_SHIP_ORPHANS"
_NO = ("0", "false", "no")
#: A broker (``amqp://``) the batches go to instead of the collector.
ENV_TRANSPORT = "STEPWATCH_TRANSPORT"


@dataclass(frozen=True, slots=True)
class Settings:
    """What init() resolved: the run id, where and how to send (the collector; a broker the
    batches go to instead), where to spool, the labels,
    the key that seals the spool (None: plain), the spool's cap (None: none), and whether
    orphaned spools under the root are shipped."""

    run_id: str
    server: str | None
    token: str | None
    root: Path
    labels: dict[str, str]
    tls: ClientTls
    key: EncryptionKey | None = None
    max_spool_bytes: int | None = None
    ship_orphans: bool = True
    transport: str | None = None


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


def _spool_cap(given: int | None, environ: Mapping[str, str], root: Path) -> int | None:
    """The argument, else the environment's size, else the default split between the node's
    ranks (``LOCAL_WORLD_SIZE``, as torchrun sets it)."""
    if given is None and environ.get(ENV_MAX_SPOOL, "").strip():
        try:
            given = parse_size(environ[ENV_MAX_SPOOL])
        except ValueError as exc:
            raise ValueError(f"{ENV_MAX_SPOOL}: {exc}") from None
    local = environ.get("LOCAL_WORLD_SIZE", "")
    return spool_cap(given, root, sharers=int(local) if local.isdigit() else 1)


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
    max_spool_bytes: int | None = None,
    transport: str | None = None,
) -> Settings:
    """Resolve init()'s arguments against the environment (read now, never at import)."""
    rid = _run_id(run_id, environ, wall)
    given_root = dir or environ.get("STEPWATCH_DIR") or Path.home() / ".stepwatch" / "spool"
    root = Path(given_root).expanduser()
    return Settings(
        run_id=rid,
        server=server or environ.get("STEPWATCH_SERVER") or None,
        token=token or environ.get("STEPWATCH_TOKEN") or None,
        root=root,
        labels=_labels(labels, environ, hostname, rid),
        key=resolve_key(None, environ),
        tls=tls or ClientTls.from_env(environ),
        max_spool_bytes=_spool_cap(max_spool_bytes, environ, root),
        ship_orphans=environ.get(ENV_SHIP_ORPHANS, "").strip().lower() not in _NO,
        transport=transport or environ.get(ENV_TRANSPORT) or None,
    )


def new_source_id(pid: int) -> str:
    """A source id unique to one Run object (the collector deduplicates by source and seq)."""
    return f"sdk-{pid}-{uuid.uuid4().hex[:12]}"
