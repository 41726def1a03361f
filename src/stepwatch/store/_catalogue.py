"""The series catalogue: name + labels interned to integer ids, held in memory.

Ids are dense and the catalogue only grows, so a commit's new series are appended in
place (their cost is theirs, not that of every series ever seen) and readers on other
threads need no lock; ``apply`` only touches SQL for keys it has not seen.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeVar

import duckdb

from ..model import ALIASES, SeriesKey

#: Labels that get their own column in the series table, for filtering in SQL.
LABEL_COLUMNS = ("run", "node", "rank", "gpu")

#: Series of one name, run and node share a histogram group (percentiles across ranks).
Group = tuple[str, str | None, str | None]

#: Label filters: a label equal to a value, or to one of a set of values (a caller's runs).
LabelMatch = Mapping[str, str | frozenset[str]]

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class SeriesInfo:
    """One stored series: its id in the store and its key."""

    id: int
    key: SeriesKey


def _group(key: SeriesKey) -> Group:
    return (key.name, key.label("run"), key.label("node"))


def series_row(sid: int, grp: int, key: SeriesKey) -> tuple[object, ...]:
    """The series table row for a key, in column order."""
    labels = json.dumps(dict(key.labels), sort_keys=True, separators=(",", ":"))
    return (sid, grp, key.name, *(key.label(c) for c in LABEL_COLUMNS), labels)


class Dense(Mapping[int, V]):
    """Values by dense ids 0..n-1, only ever appended: a reader on another thread iterates the
    ids there were when it started while the writer appends more."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[V] = []

    def __getitem__(self, i: int) -> V:
        if not 0 <= i < len(self._items):
            raise KeyError(i)
        return self._items[i]

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._items)))

    def __len__(self) -> int:
        return len(self._items)

    def append(self, value: V) -> None:
        self._items.append(value)


@dataclass(frozen=True, slots=True)
class NewSeries:
    """Series one commit adds, numbered after the catalogue's but not in it yet: the commit
    may still fail, and then the catalogue never knew them."""

    ids: dict[SeriesKey, int] = field(default_factory=dict)
    entries: list[tuple[int, int, SeriesKey]] = field(default_factory=list)  # id, group, key

    def rows(self) -> list[tuple[object, ...]]:
        """The series table rows to insert."""
        return [series_row(*e) for e in self.entries]


class Catalogue:
    """Every series: key -> id, id -> key and histogram group. Only ever grows, by ``add``
    after a commit, at the cost of what it adds; a series is published (in ``ids`` and
    ``by_name``) after its key and group, so readers on other threads see it whole or not."""

    __slots__ = ("by_name", "by_run", "groups", "grp_of", "group_size", "ids", "keys")

    def __init__(self) -> None:
        self.ids: dict[SeriesKey, int] = {}
        self.keys: Dense[SeriesKey] = Dense()
        self.grp_of: Dense[int] = Dense()
        self.groups: dict[Group, int] = {}
        self.group_size: list[int] = []
        self.by_name: dict[str, list[int]] = {}
        self.by_run: dict[str, list[int]] = {}

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection) -> Catalogue:
        """Read the whole catalogue of a store file."""
        rows = con.execute("SELECT id, grp, name, labels FROM series ORDER BY id").fetchall()
        new = NewSeries()
        for sid, grp, name, labels in rows:
            key = SeriesKey(name, tuple(sorted(json.loads(labels).items())))
            new.entries.append((sid, grp, key))
        cat = cls()
        cat.add(new)
        return cat

    def __len__(self) -> int:
        return len(self.keys)

    def register(self, keys: Iterable[SeriesKey]) -> NewSeries:
        """The series of ``keys`` that are not in the catalogue, numbered to follow it; costs
        what ``keys`` holds, not what the catalogue does."""
        new = NewSeries()
        groups: dict[Group, int] = {}
        for key in keys:
            if key in self.ids or key in new.ids:
                continue
            g = _group(key)
            grp = self.groups.get(g, groups.get(g))
            if grp is None:
                grp = groups[g] = len(self.group_size) + len(groups)
            sid = new.ids[key] = len(self.keys) + len(new.entries)
            new.entries.append((sid, grp, key))
        return new

    def add(self, new: NewSeries) -> None:
        """Take in the series of a commit that succeeded, in id order."""
        for sid, grp, key in new.entries:
            if sid != len(self.keys):
                raise ValueError(f"series id {sid} does not follow {len(self.keys) - 1}")
            self.keys.append(key)
            self.grp_of.append(grp)
            self.group_size.extend([0] * (grp + 1 - len(self.group_size)))
            self.group_size[grp] += 1
            self.groups[_group(key)] = grp
            self.ids[key] = sid
            self.by_name.setdefault(key.name, []).append(sid)
            if (run := key.label("run")) is not None:
                self.by_run.setdefault(run, []).append(sid)

    def select(self, name: str | None, match: LabelMatch | None) -> list[SeriesInfo]:
        """Series with this name (aliases like ``loss`` too; any if None) whose labels equal
        every pair in ``match`` (a set: one of its values)."""
        canonical = None if name is None else ALIASES.get(name, name)
        wanted = {
            k: v if isinstance(v, frozenset) else frozenset({str(v)})
            for k, v in (match or {}).items()
        }
        out = []
        for sid in self._candidates(canonical, wanted.get("run")):
            key = self.keys[sid]
            if canonical not in (None, key.name):
                continue
            if all(key.label(k) in v for k, v in wanted.items()):
                out.append(SeriesInfo(sid, key))
        return out

    def _candidates(self, name: str | None, runs: frozenset[str] | None) -> Iterable[int]:
        """The ids worth looking at, in id order: the runs' own series or the name's, whichever
        are fewer, so that asking about one run costs that run, not every run ever seen."""
        named = None if name is None else self.by_name.get(name, [])
        if runs is not None:
            lists = [self.by_run.get(r, []) for r in runs]
            if named is None or sum(map(len, lists)) < len(named):
                return sorted(chain.from_iterable(lists))
        return self.keys if named is None else named

    def whole_groups(self, chosen: list[SeriesInfo], by: str | None) -> bool:
        """True when ``chosen`` is a union of whole histogram groups, each with one ``by`` value."""
        counts: dict[int, int] = {}
        values: dict[int, set[str | None]] = {}
        for info in chosen:
            grp = self.grp_of[info.id]
            counts[grp] = counts.get(grp, 0) + 1
            values.setdefault(grp, set()).add(info.key.label(by) if by else None)
        return all(n == self.group_size[g] and len(values[g]) == 1 for g, n in counts.items())
