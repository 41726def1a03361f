"""How much disk the store may take: a cap (a size or a share of its file system), and never
so much that its file system runs out.

Why both: a cap alone does not see other files filling the disk, and a full disk fails every
write, ingest and the collector's own records alike. So the limit is the smaller of the cap
and what the store could reach on its file system (its file plus the free space) less a floor
kept free for everything else.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._sizes import parse_share, parse_size

__all__ = ["DiskCap", "Space"]

#: Kept free on the store's file system: this share of it, at most ``_FLOOR_MAX_BYTES``.
_FLOOR_SHARE = 0.05
_FLOOR_MAX_BYTES = 5 << 30

DiskUsage = Callable[[Path], Any]


@dataclass(frozen=True, slots=True)
class Space:
    """The store's size against its limit, in bytes."""

    used_bytes: int
    limit_bytes: int

    @property
    def ratio(self) -> float:
        """Used over the limit (1.0 or more: at the limit)."""
        return self.used_bytes / self.limit_bytes if self.limit_bytes > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class DiskCap:
    """A cap in bytes, or a share of the file system's size; neither: the file system's room."""

    max_bytes: int | None = None
    share: float | None = None

    @classmethod
    def parse(cls, text: str) -> DiskCap:
        """``200G``, ``512MiB``, ``1073741824``, ``80%`` (of the file system) or ``none``."""
        text = text.strip()
        if text.lower() == "none":
            return cls()
        if (share := parse_share(text, "the file system")) is not None:
            return cls(share=share)
        try:
            size = parse_size(text)
        except ValueError:
            raise ValueError(
                f"not a size: {text!r} (bytes, a number with K, M, G or T (binary units), "
                "a share of the file system such as 80%, or none)"
            ) from None
        if size == 0:
            raise ValueError("a cap of 0 bytes leaves no room for anything (none: no cap)")
        return cls(max_bytes=size)

    def __str__(self) -> str:
        if self.max_bytes is not None:
            return f"{self.max_bytes} bytes"
        return "none" if self.share is None else f"{self.share:.0%} of the file system"

    def measure(
        self, path: Path, used_bytes: int, disk_usage: DiskUsage = shutil.disk_usage
    ) -> Space:
        """The limit of the store at ``path`` whose blocks in use (and WAL) are ``used_bytes``."""
        usage = disk_usage(path.parent)
        on_disk = file_bytes(path)
        floor = min(int(usage.total * _FLOOR_SHARE), _FLOOR_MAX_BYTES)
        limits = [on_disk + int(usage.free) - floor]
        if self.max_bytes is not None:
            limits.append(self.max_bytes)
        if self.share is not None:
            limits.append(int(usage.total * self.share))
        return Space(used_bytes, max(0, min(limits)))


def wal_path(path: Path) -> Path:
    """Where DuckDB keeps the write-ahead log of the database file ``path``."""
    return path.with_name(path.name + ".wal")


def file_bytes(path: Path) -> int:
    """Bytes the database file ``path`` and its write-ahead log take on disk."""
    return sum(p.stat().st_size for p in (path, wal_path(path)) if p.exists())
