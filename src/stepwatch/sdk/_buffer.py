"""The training thread's side: appending to in-memory columns is all that ``log`` costs.

Samples are columns of ``array.array`` (value f8, series u4); the timestamp and
step are stored once per ``log`` call (ts f8, step i8, count u4) and expanded
when the batch is encoded, off the training thread.
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass, field
from typing import Any

from ..model import SeriesKey

__all__ = ["Buffer", "Columns", "SeriesTable"]

assert array("I").itemsize == 4, "series ids are stored as 4-byte unsigned ints"


class SeriesTable:
    """Interns series keys to small integers, keeping each key's wire form for encoding."""

    def __init__(self) -> None:
        self._ids: dict[SeriesKey, int] = {}
        self.wire_keys: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()

    def intern(self, key: SeriesKey) -> int:
        """The id of ``key``, assigned on first sight."""
        with self._lock:
            sid = self._ids.get(key)
            if sid is None:
                sid = self._ids[key] = len(self.wire_keys)
                self.wire_keys.append((key.name, dict(key.labels)))
            return sid


@dataclass(slots=True)
class Columns:
    """Samples gathered since the last swap."""

    value: array[float] = field(default_factory=lambda: array("d"))
    series: array[int] = field(default_factory=lambda: array("I"))
    ts: array[float] = field(default_factory=lambda: array("d"))
    step: array[int] = field(default_factory=lambda: array("q"))
    count: array[int] = field(default_factory=lambda: array("I"))
    events: list[dict[str, Any]] = field(default_factory=list)


class Buffer:
    """Columns behind a lock held only for an append or a swap."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cols = Columns()

    def append(self, series: list[int], values: list[float], ts: float, step: int) -> int:
        """Add one ``log`` call's samples; return how many samples are now buffered."""
        with self._lock:
            cols = self._cols
            cols.value.extend(values)
            cols.series.extend(series)
            cols.ts.append(ts)
            cols.step.append(step)
            cols.count.append(len(values))
            return len(cols.value)

    def add_event(self, event: dict[str, Any]) -> None:
        """Queue an event for the next batch."""
        with self._lock:
            self._cols.events.append(event)

    def swap(self) -> Columns:
        """Take everything buffered, leaving fresh empty columns."""
        with self._lock:
            cols, self._cols = self._cols, Columns()
            return cols
