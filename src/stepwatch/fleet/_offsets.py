"""Where this collector stopped reading each partition, kept beside its store across restarts.

Written after the batches are committed, at most once a second: a crash in between makes the
collector read a few batches again, which the store's per-source sequence numbers drop.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["OffsetBook"]


class OffsetBook:
    """The next offset to read per partition, saved to ``path`` (JSON) now and then."""

    def __init__(
        self, path: Path, every_s: float = 1.0, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.path, self._every, self._monotonic = path, every_s, monotonic
        self._lock = threading.Lock()
        self._next: dict[int, int] = {}
        self._saved_at = -float("inf")
        try:
            self._next = {int(k): int(v) for k, v in json.loads(path.read_text()).items()}
        except FileNotFoundError:
            pass
        except (ValueError, AttributeError) as exc:
            raise ValueError(f"{path}: not a partition offsets file ({exc})") from None

    def next(self, partition: int) -> int | None:
        """Where to resume ``partition`` (None: never read here, from its first offset)."""
        with self._lock:
            return self._next.get(partition)

    def done(self, partition: int, offset: int) -> None:
        """Record that everything up to ``offset`` is committed; saved when due."""
        with self._lock:
            self._next[partition] = max(offset + 1, self._next.get(partition, 0))
            due = self._monotonic() - self._saved_at >= self._every
        if due:
            self.save()

    def save(self) -> None:
        """Write the offsets now (atomically: a crash leaves the old file or the new)."""
        with self._lock:
            self._saved_at = self._monotonic()
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({str(k): v for k, v in sorted(self._next.items())}))
            os.replace(tmp, self.path)
