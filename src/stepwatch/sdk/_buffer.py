"""The training thread's side: keeping a ``log`` call's lists is all that ``log`` costs.

After the optimizer's pass over the weights evicts the caches, each object the
training thread touches costs a cache miss, so ``append`` keeps the call's own
lists in one tuple and counts its samples; the columns (value f8, ts f8, step i8,
series u4) are built by ``swap``, on the writer's thread, with numpy.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from itertools import chain
from typing import Any, TypeVar

import numpy as np

from ..model import SeriesKey

__all__ = ["Buffer", "Call", "Columns", "SeriesTable"]

#: One ``log`` call: its series ids and values (pairwise), and the ts and step they share.
Call = tuple[list[int], list[float], float, int]
_T = TypeVar("_T")


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


@dataclass(frozen=True, slots=True)
class Columns:
    """Samples gathered since the last swap, one array per field, and the events."""

    value: np.ndarray
    ts: np.ndarray
    step: np.ndarray
    series: np.ndarray
    events: list[dict[str, Any]]

    @classmethod
    def of(cls, calls: list[Call], events: list[dict[str, Any]]) -> Columns:
        """The calls' samples in order, each call's ts and step repeated for its samples."""
        series, values, ts, step = zip(*calls, strict=True) if calls else ((), (), (), ())
        counts = np.fromiter(map(len, values), np.intp, len(calls))
        samples = int(counts.sum())
        return cls(
            np.fromiter(chain.from_iterable(values), np.float64, samples),
            np.repeat(np.array(ts, np.float64), counts),
            np.repeat(np.array(step, np.int64), counts),
            np.fromiter(chain.from_iterable(series), np.uint32, samples),
            events,
        )


class Buffer:
    """The calls and events since the last swap.

    ``append`` takes no lock: even an uncontended one costs microseconds once the caches are
    evicted. Deques append and pop atomically, so a call appended during a swap goes to the
    next one; only swaps exclude each other. The sample count is not locked: a race
    miscounts it by the racing calls' samples until the next swap, which moves an early
    flush by that much and loses nothing.
    """

    def __init__(self) -> None:
        self._calls: deque[Call] = deque()
        self._events: deque[dict[str, Any]] = deque()
        self._samples = 0
        self._swap_lock = threading.Lock()

    def append(self, series: list[int], values: list[float], ts: float, step: int) -> int:
        """Keep one call's samples, its lists as given (the caller must not change them after);
        return about how many samples are now buffered."""
        self._calls.append((series, values, ts, step))
        self._samples = samples = self._samples + len(values)
        return samples

    def add_event(self, event: dict[str, Any]) -> None:
        """Queue an event for the next batch."""
        self._events.append(event)

    def swap(self) -> Columns:
        """Take everything buffered as columns (built here, off the training thread)."""
        with self._swap_lock:
            self._samples = 0
            calls = _drain(self._calls)
            events = _drain(self._events)
        return Columns.of(calls, events)


def _drain(queue: deque[_T]) -> list[_T]:
    """What ``queue`` holds now, oldest first; what is appended meanwhile stays for later."""
    return [queue.popleft() for _ in range(len(queue))]
