"""The bounded state of the analysis: a reorder window (traces are written nearly, not quite,
in time order), unions of busy intervals by category, and self time by a stack per thread."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Reorder", "SelfTimes", "Table", "Timeline", "TimelineTotals"]

_NEVER = -1e300
#: Distinct names kept per table; the rest are summed under one row, so memory stays bounded.
MAX_NAMES = 50_000
OTHER_NAMES = "(other names)"


class Reorder:
    """Releases ``(start, end, item)`` in start order (longer first on ties), holding back at
    most ``window`` of them: the sort a nearly sorted stream needs, in bounded memory.
    ``late`` counts those that came after a later one had already been released."""

    def __init__(self, window: int, sink: Callable[[float, float, Any], None]) -> None:
        self._window = window
        self._sink = sink
        self._heap: list[tuple[float, float, int, Any]] = []
        self._seq = 0
        self._last = (_NEVER, 0.0)
        self.late = 0

    def push(self, start: float, end: float, item: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (start, -end, self._seq, item))
        if len(self._heap) > self._window:
            self._release(heapq.heappop(self._heap))

    def flush(self) -> None:
        while self._heap:
            self._release(heapq.heappop(self._heap))

    def _release(self, entry: tuple[float, float, int, Any]) -> None:
        start, neg_end, _, item = entry
        if (start, neg_end) < self._last:
            self.late += 1
        self._last = (start, neg_end)
        self._sink(start, -neg_end, item)


@dataclass(frozen=True)
class TimelineTotals:
    """Exclusive time per category (a higher-priority category's time is not counted again
    for a lower one), the busy time, the hull of the intervals, and each category's own
    union (for overlaps)."""

    exclusive: tuple[float, ...]
    own: tuple[float, ...]
    busy: float
    first: float
    last: float


class Timeline:
    """Unions of busy intervals of ``categories`` categories in priority order, fed in start
    order: the union of each category alone and of each prefix of the priority order, each an
    open interval and a running total, so the state is O(categories) whatever the length."""

    def __init__(self, categories: int) -> None:
        n = 2 * categories  # own unions, then prefix unions
        self._n = categories
        self._s = [_NEVER] * n
        self._e = [_NEVER] * n
        self._total = [0.0] * n
        self.first = float("inf")
        self.last = -float("inf")

    def add(self, start: float, end: float, category: int) -> None:
        self.first = min(self.first, start)
        self.last = max(self.last, end)
        self._merge(category, start, end)
        for j in range(self._n + category, 2 * self._n):
            self._merge(j, start, end)

    def _merge(self, j: int, start: float, end: float) -> None:
        e = self._e
        if start > e[j]:
            self._total[j] += e[j] - self._s[j]
            self._s[j] = start
            e[j] = end
        elif end > e[j]:
            e[j] = end

    def totals(self) -> TimelineTotals:
        closed = [t + e - s for t, s, e in zip(self._total, self._s, self._e, strict=True)]
        prefix = closed[self._n :]
        exclusive = tuple(p - (prefix[i - 1] if i else 0.0) for i, p in enumerate(prefix))
        return TimelineTotals(
            exclusive, tuple(closed[: self._n]), prefix[-1], self.first, self.last
        )


class Table:
    """Self time, calls and a tag per name, at most ``MAX_NAMES`` names (the rest summed
    under one)."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Any]] = {}

    def add(self, name: str, self_us: float, tag: str = "") -> None:
        """Count one call; ``tag`` (its category, its kind) is kept from the first call."""
        row = self.rows.get(name)
        if row is None:
            if len(self.rows) >= MAX_NAMES:
                name = OTHER_NAMES
                row = self.rows.get(name)
            if row is None:
                row = self.rows[name] = [0.0, 0, tag]
        row[0] += self_us
        row[1] += 1


class SelfTimes:
    """Self time of nested events on one thread (its duration less its direct children's), as
    torch's profiler computes it: events in start order, a child is one that starts inside the
    open event and ends no later, and an only child of the same name as its parent is one call
    with it (``aten::sum`` inside ``aten::sum``). Events are pushed to ``order`` as
    ``(name, kind)`` items; finished ones go to ``table``, tagged ``tags[kind]``;
    ``on_open(start, end, name, kind, inside)`` sees each event with whether an enclosing one
    was flagged, and returns its own flag."""

    def __init__(
        self,
        table: Table,
        window: int,
        tags: tuple[str, ...] = ("",),
        on_open: Callable[[float, float, str, int, bool], bool] | None = None,
    ) -> None:
        self._table = table
        self._tags = tags
        self._on_open = on_open
        self._stack: list[_Open] = []
        self.order = Reorder(window, self._open)

    def _open(self, start: float, end: float, item: Any) -> None:
        stack = self._stack
        while stack and (start >= stack[-1].end or end > stack[-1].end):
            self._close(stack.pop())
        inside = bool(stack and stack[-1].flag)
        if stack:
            stack[-1].children_us += end - start
            stack[-1].children += 1
        name, kind = item
        flag = self._on_open(start, end, name, kind, inside) if self._on_open else inside
        stack.append(_Open(end, name, kind, end - start, flag))

    def _close(self, event: _Open) -> None:
        twin = event.twin
        if twin is not None:
            if event.children == 1:  # its only child, of its name: one call
                event.children_us += twin.children_us - twin.duration_us
            else:
                self._add(twin)
        parent = self._stack[-1] if self._stack else None
        if parent is not None and parent.name == event.name:
            if parent.twin is not None:
                self._add(parent.twin)
            parent.twin = event  # decided when the parent closes
        else:
            self._add(event)

    def _add(self, event: _Open) -> None:
        self._table.add(event.name, event.duration_us - event.children_us, self._tags[event.kind])

    def flush(self) -> None:
        self.order.flush()
        while self._stack:
            self._close(self._stack.pop())


@dataclass(slots=True)
class _Open:
    """An event on a thread's stack, until it ends."""

    end: float
    name: str
    kind: int
    duration_us: float
    flag: bool
    children_us: float = 0.0
    children: int = 0
    twin: _Open | None = None
