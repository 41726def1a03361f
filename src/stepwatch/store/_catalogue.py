"""The series catalogue: name + labels interned to integer ids, held in memory.

A snapshot is immutable and replaced as a whole when new series commit, so
readers on other threads never see it half-updated and ``apply`` only touches
SQL for keys it has not seen.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import duckdb

from ..model import ALIASES, SeriesKey

#: Labels that get their own column in the series table, for filtering in SQL.
LABEL_COLUMNS = ("run", "node", "rank", "gpu")

#: Series of one name, run and node share a histogram group (percentiles across ranks).
Group = tuple[str, str | None, str | None]

#: Label filters: a label equal to a value, or to one of a set of values (a caller's runs).
LabelMatch = Mapping[str, str | frozenset[str]]


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


@dataclass(frozen=True, slots=True)
class Catalogue:
    """An immutable snapshot of every series: key -> id, id -> key and histogram group."""

    ids: dict[SeriesKey, int] = field(default_factory=dict)
    keys: dict[int, SeriesKey] = field(default_factory=dict)
    grp_of: dict[int, int] = field(default_factory=dict)
    groups: dict[Group, int] = field(default_factory=dict)
    group_size: dict[int, int] = field(default_factory=dict)
    by_name: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection) -> Catalogue:
        """Read the whole catalogue of a store file."""
        rows = con.execute("SELECT id, grp, name, labels FROM series ORDER BY id").fetchall()
        entries = [
            (sid, grp, SeriesKey(name, tuple(sorted(json.loads(labels).items()))))
            for sid, grp, name, labels in rows
        ]
        return cls()._with(entries)

    def __len__(self) -> int:
        return len(self.ids)

    def register(self, keys: Iterable[SeriesKey]) -> tuple[Catalogue, list[tuple[object, ...]]]:
        """A catalogue that also knows ``keys``, and the series rows to insert for the new ones."""
        next_id = max(self.keys, default=-1) + 1
        next_grp = max(self.group_size, default=-1) + 1
        groups: dict[Group, int] = {}
        entries: list[tuple[int, int, SeriesKey]] = []
        for key in dict.fromkeys(k for k in keys if k not in self.ids):
            g = _group(key)
            grp = self.groups.get(g, groups.get(g))
            if grp is None:
                grp = groups[g] = next_grp
                next_grp += 1
            entries.append((next_id, grp, key))
            next_id += 1
        if not entries:
            return self, []
        return self._with(entries), [series_row(*e) for e in entries]

    def _with(self, entries: list[tuple[int, int, SeriesKey]]) -> Catalogue:
        new = Catalogue(
            dict(self.ids),
            dict(self.keys),
            dict(self.grp_of),
            dict(self.groups),
            dict(self.group_size),
            {name: list(ids) for name, ids in self.by_name.items()},
        )
        for sid, grp, key in entries:
            new.ids[key] = sid
            new.keys[sid] = key
            new.grp_of[sid] = grp
            new.groups[_group(key)] = grp
            new.group_size[grp] = new.group_size.get(grp, 0) + 1
            new.by_name.setdefault(key.name, []).append(sid)
        return new

    def select(self, name: str | None, match: LabelMatch | None) -> list[SeriesInfo]:
        """Series with this name (aliases like ``loss`` too; any if None) whose labels equal
        every pair in ``match`` (a set: one of its values)."""
        ids = sorted(self.keys) if name is None else self.by_name.get(ALIASES.get(name, name), [])
        wanted = {
            k: v if isinstance(v, frozenset) else frozenset({str(v)})
            for k, v in (match or {}).items()
        }
        out = []
        for sid in ids:
            key = self.keys[sid]
            if all(key.label(k) in v for k, v in wanted.items()):
                out.append(SeriesInfo(sid, key))
        return out

    def whole_groups(self, chosen: list[SeriesInfo], by: str | None) -> bool:
        """True when ``chosen`` is a union of whole histogram groups, each with one ``by`` value."""
        counts: dict[int, int] = {}
        values: dict[int, set[str | None]] = {}
        for info in chosen:
            grp = self.grp_of[info.id]
            counts[grp] = counts.get(grp, 0) + 1
            values.setdefault(grp, set()).add(info.key.label(by) if by else None)
        return all(n == self.group_size[g] and len(values[g]) == 1 for g, n in counts.items())
