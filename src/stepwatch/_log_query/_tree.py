"""A read query as a tree of clauses, each evaluated two ways with one meaning: as SQL over the
events table and in memory over one event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from .._event_json import json_member
from .._regex import Regex, compile_regex
from ._dates import date_math


@dataclass(frozen=True, slots=True)
class _Field:
    """Where a field lives: ``text``, ``level`` (in data), ``run`` or a label ``name``."""

    kind: str
    name: str = ""

    def sql(self, params: list[object]) -> str:
        if self.kind == "text":
            return "text"
        if self.kind == "run":
            return "run"
        if self.kind == "level":
            return "json_extract_string(data, '$.level')"
        params.append(f'$."{self.name}"')
        return "json_extract_string(labels, ?)"

    def value(self, event: _Line) -> str | None:
        if self.kind == "text":
            return event.text
        if self.kind == "run":
            return event.labels.get("run")
        if self.kind == "level":
            level = event.data.get("level")
            return level if isinstance(level, str) else None
        return event.labels.get(self.name)

    def needle(self, value: str) -> tuple[str, str] | None:
        """A column and a substring every stored line with this value holds (JSON as the store
        writes it), cheap to test before parsing JSON; None where there is none."""
        if self.kind not in ("level", "label") or not value.isascii():
            return None
        if self.kind == "level":
            return "data", json_member("level", value)
        return "labels", json_member(self.name, value)


class _Line(Protocol):
    """What the in-memory evaluator reads of an event (``model.Event`` has these)."""

    ts: float
    text: str
    labels: Mapping[str, str]
    data: Mapping[str, Any]


Node = Any  # one of the clause classes below


@dataclass(frozen=True, slots=True)
class _All:
    def sql(self, params: list[object], now: float) -> str:
        return "true"

    def test(self, line: _Line, now: float) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class _Words:
    """Every (or any) word occurs in the message, ignoring case."""

    words: tuple[str, ...]
    any: bool

    def sql(self, params: list[object], now: float) -> str:
        if not self.words:
            return "false"
        params.extend(self.words)
        parts = ["contains(lower(text), ?)"] * len(self.words)
        return "(" + (" OR " if self.any else " AND ").join(parts) + ")"

    def test(self, line: _Line, now: float) -> bool:
        if not self.words:
            return False
        lower = line.text.lower()
        found = (w in lower for w in self.words)
        return any(found) if self.any else all(found)


@dataclass(frozen=True, slots=True)
class _Equals:
    """The field's whole value is one of ``values`` (ignoring case when ``fold``)."""

    field: _Field
    values: tuple[str, ...]
    fold: bool

    def sql(self, params: list[object], now: float) -> str:
        pre: list[str] = []
        for value in self.values:
            found = self.field.needle(value.lower() if self.fold else value)
            if found is None:
                pre = []
                break
            column, needle = found
            pre.append(f"contains({f'lower({column})' if self.fold else column}, ?)")
            params.append(needle)
        expr = self.field.sql(params)
        expr = f"lower({expr})" if self.fold else expr
        params.extend(v.lower() if self.fold else v for v in self.values)
        check = f"coalesce({expr} IN ({', '.join('?' * len(self.values))}), false)"
        # The substring test is a conjunct of its own, outside coalesce: DuckDB then tests it
        # in the scan, once per distinct JSON text of the column, and parses JSON only for the
        # lines that pass; inside coalesce it parsed every line's JSON.
        return f"({' OR '.join(pre)}) AND {check}" if pre else check

    def test(self, line: _Line, now: float) -> bool:
        value = self.field.value(line)
        if value is None:
            return False
        if self.fold:
            return value.lower() in {v.lower() for v in self.values}
        return value in self.values


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> Regex:
    return compile_regex(pattern)


@dataclass(frozen=True, slots=True)
class _Regex:
    field: _Field
    pattern: str

    def sql(self, params: list[object], now: float) -> str:
        expr = self.field.sql(params)
        params.append(self.pattern)
        return f"coalesce(regexp_matches({expr}, ?), false)"

    def test(self, line: _Line, now: float) -> bool:
        value = self.field.value(line)
        return value is not None and _compiled(self.pattern).search(value) is not None


@dataclass(frozen=True, slots=True)
class _Bound:
    """One end of a time range, resolved against ``now`` when evaluated."""

    op: str  # gte, gt, lte, lt
    given: str | float
    millis: bool
    round_up: bool

    def seconds(self, now: float) -> float:
        if isinstance(self.given, float):
            return self.given / 1000 if self.millis else self.given
        return date_math(self.given, now, self.round_up, self.millis)


@dataclass(frozen=True, slots=True)
class _Range:
    bounds: tuple[_Bound, ...]

    def sql(self, params: list[object], now: float) -> str:
        ops = {"gte": ">=", "gt": ">", "lte": "<=", "lt": "<"}
        parts = []
        for bound in self.bounds:
            parts.append(f"ts {ops[bound.op]} ?")
            params.append(bound.seconds(now))
        return "(" + " AND ".join(parts) + ")" if parts else "true"

    def test(self, line: _Line, now: float) -> bool:
        for bound in self.bounds:
            at = bound.seconds(now)
            held = {
                "gte": line.ts >= at,
                "gt": line.ts > at,
                "lte": line.ts <= at,
                "lt": line.ts < at,
            }[bound.op]
            if not held:
                return False
        return True


@dataclass(frozen=True, slots=True)
class _Bool:
    must: tuple[Node, ...]
    should: tuple[Node, ...]
    must_not: tuple[Node, ...]
    min_should: int

    def sql(self, params: list[object], now: float) -> str:
        parts = [f"({c.sql(params, now)})" for c in self.must]
        if self.should and self.min_should > 0:
            shoulds = [f"({c.sql(params, now)})" for c in self.should]
            if self.min_should == 1:
                parts.append("(" + " OR ".join(shoulds) + ")")
            else:
                count = " + ".join(f"{s}::INTEGER" for s in shoulds)
                parts.append(f"({count}) >= {self.min_should}")
        parts += [f"NOT ({c.sql(params, now)})" for c in self.must_not]
        return " AND ".join(parts) if parts else "true"

    def test(self, line: _Line, now: float) -> bool:
        if not all(c.test(line, now) for c in self.must):
            return False
        if self.should and self.min_should > 0:
            if sum(c.test(line, now) for c in self.should) < self.min_should:
                return False
        return not any(c.test(line, now) for c in self.must_not)


@dataclass(frozen=True, slots=True)
class LogQuery:
    """A read query: ``where`` for the store, ``matches`` for one event; ``now`` (seconds)
    resolves date math such as ``now-5m``."""

    root: Node
    #: The query as given, as canonical JSON (what a rule file or a saved search keeps).
    source: str

    def where(self, now: float) -> tuple[str, list[object]]:
        """A SQL condition over the events table's columns and its parameters."""
        params: list[object] = []
        return self.root.sql(params, now), params

    def matches(self, event: Any, now: float) -> bool:
        """Whether one event (``ts``, ``text``, ``labels``, ``data``) matches."""
        return bool(self.root.test(event, now))
