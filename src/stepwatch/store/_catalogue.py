"""The series catalogue: name + labels interned to integer ids.

The ``series`` table is the whole catalogue; memory holds the series of the runs written to
lately (and those of no run), so the collector's memory follows the runs that are live, not
every run it has ever seen. A run is read back from the table (by its index) when it is
written to again; a query about runs no longer in memory reads their series from the table
on its own cursor, and so does one about no run in particular.

Only the writer (under the store's lock) changes what memory holds; readers on other
threads find a series whole or not at all, and never install what they read.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb

from ..model import ALIASES, SeriesKey

#: Labels that get their own column in the series table, for filtering in SQL.
LABEL_COLUMNS = ("run", "node", "rank", "gpu")

#: Series of one name, run and node share a histogram group (percentiles across ranks).
Group = tuple[str, str | None, str | None]

#: Label filters: a label equal to a value, or to one of a set of values (a caller's runs).
LabelMatch = Mapping[str, str | frozenset[str]]

#: Series of runs kept in memory at most; beyond, the runs written to least lately go.
DEFAULT_RESIDENT_SERIES = 1_000_000

_COLUMNS = "SELECT id, grp, name, labels FROM series"


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


def _key(name: str, labels: str) -> SeriesKey:
    return SeriesKey(name, tuple(sorted(json.loads(labels).items())))


@dataclass(frozen=True, slots=True)
class NewSeries:
    """A commit's series: the id of every key it names (``ids``), and those that are new
    (``entries``), numbered after the catalogue's but not in it yet: the commit may still
    fail, and then the catalogue never knew them."""

    ids: dict[SeriesKey, int] = field(default_factory=dict)
    entries: list[tuple[int, int, SeriesKey]] = field(default_factory=list)  # id, group, key

    def rows(self) -> list[tuple[object, ...]]:
        """The series table rows to insert."""
        return [series_row(*e) for e in self.entries]


class _Home:
    """The series of one run (or of no run) in memory. Only ever appended to, a series
    published in ``order`` last, so a reader iterating it sees each one whole."""

    __slots__ = ("group_size", "groups", "ids", "keys", "order")

    def __init__(self) -> None:
        self.ids: dict[SeriesKey, int] = {}
        self.keys: dict[int, SeriesKey] = {}
        self.groups: dict[Group, int] = {}
        self.group_size: dict[int, int] = {}
        self.order: list[int] = []

    @classmethod
    def read(cls, rows: Iterable[tuple[Any, ...]]) -> _Home:
        home = cls()
        for sid, grp, name, labels in rows:
            home.put(int(sid), int(grp), _key(name, labels))
        return home

    def put(self, sid: int, grp: int, key: SeriesKey) -> None:
        self.keys[sid] = key
        self.groups[_group(key)] = grp
        self.group_size[grp] = self.group_size.get(grp, 0) + 1
        self.ids[key] = sid
        self.order.append(sid)


def _read_run(cur: duckdb.DuckDBPyConnection, run: str | None) -> _Home:
    """A run's series from the table (through its index), or those of no run."""
    if run is None:
        return _Home.read(cur.execute(f"{_COLUMNS} WHERE run IS NULL ORDER BY id").fetchall())
    return _Home.read(cur.execute(f"{_COLUMNS} WHERE run = ? ORDER BY id", [run]).fetchall())


class Catalogue:
    """Series ids and keys, with the series of lately written runs in memory (up to
    ``resident_series`` of them) and the rest read from the table when asked for."""

    __slots__ = ("_homes", "_next_grp", "_next_id", "_resident", "_runless", "resident_series")

    def __init__(self, next_id: int, next_grp: int, runless: _Home, resident_series: int) -> None:
        self._next_id, self._next_grp = next_id, next_grp
        self._runless = runless
        self._homes: OrderedDict[str, _Home] = OrderedDict()  # least lately written first
        self._resident = 0
        self.resident_series = resident_series

    @classmethod
    def load(
        cls, cur: duckdb.DuckDBPyConnection, resident_series: int = DEFAULT_RESIDENT_SERIES
    ) -> Catalogue:
        """The catalogue of a store file: its counters and the series of no run."""
        ((next_id, next_grp),) = cur.execute(
            "SELECT coalesce(max(id) + 1, 0), coalesce(max(grp) + 1, 0) FROM series"
        ).fetchall()
        return cls(int(next_id), int(next_grp), _read_run(cur, None), resident_series)

    def __len__(self) -> int:
        """Series ever stored (ids are dense and never reused)."""
        return self._next_id

    def resident(self) -> tuple[int, int]:
        """Runs and series of runs held in memory now."""
        return len(self._homes), self._resident

    # ---- the writer ---------------------------------------------------------------------

    def register(self, cur: duckdb.DuckDBPyConnection, keys: Iterable[SeriesKey]) -> NewSeries:
        """The ids of ``keys``, those not stored yet numbered to follow the catalogue; costs
        what ``keys`` holds (and the series of a run read back), not what the store does."""
        new = NewSeries()
        groups: dict[Group, int] = {}
        for key in keys:
            if key in new.ids:
                continue
            home = self._writing(cur, key.label("run"))
            if (sid := home.ids.get(key)) is not None:
                new.ids[key] = sid
                continue
            g = _group(key)
            grp = home.groups.get(g, groups.get(g))
            if grp is None:
                grp = groups[g] = self._next_grp + len(groups)
            sid = new.ids[key] = self._next_id + len(new.entries)
            new.entries.append((sid, grp, key))
        return new

    def add(self, new: NewSeries) -> None:
        """Take in the series of a commit that succeeded, in id order."""
        for sid, grp, key in new.entries:
            if sid != self._next_id:
                raise ValueError(f"series id {sid} does not follow {self._next_id - 1}")
            run = key.label("run")
            home = self._runless if run is None else self._homes.get(run)
            if home is not None:  # else let go since: read back from the table when written
                home.put(sid, grp, key)
                self._resident += run is not None
            self._next_id, self._next_grp = sid + 1, max(self._next_grp, grp + 1)
        self._shrink()

    def forget(self, run: str) -> None:
        """Let a run's series go from memory (it ended); read back if it is written again."""
        home = self._homes.pop(run, None)
        if home is not None:
            self._resident -= len(home.order)

    def _writing(self, cur: duckdb.DuckDBPyConnection, run: str | None) -> _Home:
        """The home of ``run`` in memory, read from the table if it is not; now the latest."""
        if run is None:
            return self._runless
        home = self._homes.get(run)
        if home is None:
            home = self._homes[run] = _read_run(cur, run)
            self._resident += len(home.order)
        else:
            self._homes.move_to_end(run)
        return home

    def _shrink(self) -> None:
        """Let the runs written to least lately go while memory holds too many series; the
        latest stays, however large."""
        while self._resident > self.resident_series and len(self._homes) > 1:
            _, home = self._homes.popitem(last=False)
            self._resident -= len(home.order)

    # ---- readers ------------------------------------------------------------------------

    def select(
        self, cur: duckdb.DuckDBPyConnection, name: str | None, match: LabelMatch | None
    ) -> list[SeriesInfo]:
        """Series with this name (aliases like ``loss`` too; any if None) whose labels equal
        every pair in ``match`` (a set: one of its values), in id order. A query naming
        runs costs those runs' series; one naming none reads the table."""
        canonical = None if name is None else ALIASES.get(name, name)
        wanted = {
            k: v if isinstance(v, frozenset) else frozenset({str(v)})
            for k, v in (match or {}).items()
        }
        runs = wanted.get("run")
        found = self._table(cur, canonical) if runs is None else self._of_runs(cur, runs)
        out = [
            SeriesInfo(sid, key)
            for sid, key in found
            if canonical in (None, key.name) and all(key.label(k) in v for k, v in wanted.items())
        ]
        return sorted(out, key=lambda i: i.id)

    def keys_of(self, cur: duckdb.DuckDBPyConnection, ids: Iterable[int]) -> dict[int, SeriesKey]:
        """The keys of these series ids (read from the table, in one query)."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        rows = cur.execute(
            "SELECT id, name, labels FROM series WHERE id BETWEEN ? AND ? AND list_contains(?, id)",
            [wanted[0], wanted[-1], wanted],
        ).fetchall()
        return {int(sid): _key(name, labels) for sid, name, labels in rows}

    def groups_of(
        self, cur: duckdb.DuckDBPyConnection, ids: Iterable[int]
    ) -> tuple[dict[int, int], dict[int, int]]:
        """Each series' histogram group, and how many series each of those groups holds."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}, {}
        rows = cur.execute(
            "SELECT id, grp FROM series WHERE id BETWEEN ? AND ? AND list_contains(?, id)",
            [wanted[0], wanted[-1], wanted],
        ).fetchall()
        grp_of = {int(sid): int(grp) for sid, grp in rows}
        grps = sorted(set(grp_of.values()))
        rows = cur.execute(  # a group's series are a run's: stored close together
            "SELECT grp, count(*) FROM series WHERE grp BETWEEN ? AND ? "
            "AND list_contains(?, grp) GROUP BY grp",
            [grps[0], grps[-1], grps],
        ).fetchall()
        return grp_of, {int(grp): int(n) for grp, n in rows}

    def _of_runs(
        self, cur: duckdb.DuckDBPyConnection, runs: frozenset[str]
    ) -> list[tuple[int, SeriesKey]]:
        """The series of these runs: from memory where it holds them, else from the table."""
        out: list[tuple[int, SeriesKey]] = []
        absent = []
        for run in runs:
            home = self._homes.get(run)
            if home is None:
                absent.append(run)
            else:
                n = len(home.order)  # what was published when we started
                out.extend((sid, home.keys[sid]) for sid in home.order[:n])
        if len(absent) == 1:  # through the index
            home = _read_run(cur, absent[0])
            out.extend((sid, home.keys[sid]) for sid in home.order)
        elif absent:
            rows = cur.execute(
                "SELECT id, name, labels FROM series WHERE list_contains(?, run)", [sorted(absent)]
            ).fetchall()
            out.extend((int(sid), _key(name, labels)) for sid, name, labels in rows)
        return out

    def _table(
        self, cur: duckdb.DuckDBPyConnection, name: str | None
    ) -> list[tuple[int, SeriesKey]]:
        """Every series of this name (of any name if None), read from the table."""
        rows = cur.execute(
            "SELECT id, name, labels FROM series WHERE ? IS NULL OR name = ?", [name, name]
        ).fetchall()
        return [(int(sid), _key(n, labels)) for sid, n, labels in rows]
