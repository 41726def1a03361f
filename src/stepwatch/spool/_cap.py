"""How large a producer's spool may grow before new batches are dropped (and counted).

Why a default at all: a collector that stays down for days would otherwise let a trainer fill
the node's disk, which kills the training it was meant to watch. The default is the smaller of
2 GiB and a tenth of the free space of the spool's file system, measured once when the producer
starts, and split between the ranks a launcher says share the node.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_CAP_BYTES", "ENV_MAX_SPOOL", "FREE_SHARE", "spool_cap"]

DEFAULT_CAP_BYTES = 2 << 30
#: Share of the spool file system's free space one node's producers may take by default.
FREE_SHARE = 0.10
#: Environment variable of the cap (a size; ``0``: no cap).
ENV_MAX_SPOOL = "STEPWATCH_MAX_SPOOL_BYTES"
DiskUsage = Callable[[Path], Any]


def _free_bytes(path: Path, disk_usage: DiskUsage) -> int | None:
    """Free space of the file system ``path`` is (or will be) on; None when it cannot be read."""
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return int(disk_usage(path).free)
    except OSError:
        return None


def spool_cap(
    given: int | None,
    path: Path,
    *,
    sharers: int = 1,
    disk_usage: DiskUsage = shutil.disk_usage,
) -> int | None:
    """The cap in bytes of a spool under ``path``; None: no cap.

    Args:
        given: a cap in bytes; ``0`` for none; None for the default (see the module).
        path: where the spool lives (need not exist yet).
        sharers: producers of the node that split the default between them (its ranks).
    """
    if given is not None:
        if given < 0:
            raise ValueError(f"the spool cap must be >= 0 bytes (0: no cap), got {given}")
        return given or None
    free = _free_bytes(path, disk_usage)
    cap = DEFAULT_CAP_BYTES if free is None else min(DEFAULT_CAP_BYTES, int(free * FREE_SHARE))
    return max(1, cap // max(1, sharers))
