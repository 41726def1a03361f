"""Log queries in Elasticsearch's bool form, read once and evaluated two ways with one meaning:
as a parameterised DuckDB ``WHERE`` over the events table (search) and in memory over one
event (log rules), so a saved search fires on exactly the lines it finds.

Why one tree and two evaluators: people paste the queries they already run against
Elasticsearch; a rule and a search that disagreed on a line would make either untrustworthy.
The tests run both over the same lines.

Meaning (documented in docs/logs.md): ``match`` on the message holds when every word of its
text (``operator: or``: any word) occurs in the line, case-insensitively; ``match_phrase`` when
the phrase does; on any other field both compare the whole value case-insensitively. ``term``
and ``terms`` compare exactly (levels, stored in lower case, ignore case). ``regexp`` searches
with RE2 (DuckDB's ``regexp_matches`` is RE2 too). ``range`` applies to the time only, with
Elasticsearch's date math (``now-5m``, ``now/d``, ``2024-05-01||+1d``). A field the line lacks
matches nothing, so ``must_not`` keeps the line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any, Protocol

from ._regex import Regex, compile_regex

__all__ = ["LogQuery", "QueryError", "parse_query", "with_filters"]


class QueryError(ValueError):
    """A query this reader cannot take; the message names the clause (an API answers 400)."""


#: The message's names; everything else names a field of the line.
_TEXT_FIELDS = frozenset({"message", "text", "log", "msg"})
_LEVEL_FIELDS = frozenset({"level", "log.level", "severity"})
_NODE_FIELDS = frozenset({"node", "host.name", "hostname", "host"})
#: Time fields whose bare numbers are epoch milliseconds, as in Elasticsearch.
_MILLIS_FIELDS = frozenset({"@timestamp", "timestamp"})
_TIME_FIELDS = _MILLIS_FIELDS | {"ts"}
#: Options any clause may carry that change nothing here.
_IGNORED = frozenset({"boost", "_name"})
_WORD = re.compile(r"\w+")
_UNITS = {"s": 1, "m": 60, "h": 3600, "H": 3600, "d": 86_400, "w": 604_800}
_UNITS |= {"M": 30 * 86_400, "y": 365 * 86_400}
_MATH = re.compile(r"([+-])(\d+)([smhHdwMy])|/([smhHdwMy])")


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
        key = "level" if self.kind == "level" else self.name
        return (
            "data" if self.kind == "level" else "labels"
        ), f"{json.dumps(key)}: {json.dumps(value)}"


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
        check = f"{expr} IN ({', '.join('?' * len(self.values))})"
        return (
            f"coalesce(({' OR '.join(pre)}) AND {check}, false)"
            if pre
            else f"coalesce({check}, false)"
        )

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
        return _date_math(self.given, now, self.round_up, self.millis)


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


def parse_query(given: object) -> LogQuery:
    """Read a query: ``{"query": {...}}`` as Elasticsearch takes it, or the clause itself."""
    if isinstance(given, Mapping) and set(given) == {"query"}:
        given = given["query"]
    return LogQuery(_clause(given, "query"), json.dumps(given, sort_keys=True))


def _one(given: object, where: str) -> tuple[str, Any]:
    """The single ``{name: body}`` entry a clause is."""
    if not isinstance(given, Mapping) or len(given) != 1:
        raise QueryError(f'{where}: expected one clause such as {{"match": ...}}, got {given!r}')
    ((name, body),) = given.items()
    return str(name), body


def _clause(given: object, where: str) -> Node:
    name, body = _one(given, where)
    here = f"{where}.{name}"
    readers: dict[str, Callable[[Any, str], Node]] = {
        "bool": _bool,
        "match": _match,
        "match_phrase": _phrase,
        "term": _term,
        "terms": _terms,
        "range": _range,
        "regexp": _regexp,
        "match_all": lambda body, here: _All(),
    }
    if name not in readers:
        raise QueryError(
            f"{here}: unsupported clause {name!r}; supported: {', '.join(sorted(readers))}"
        )
    return readers[name](body, here)


def _mapping(body: object, where: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise QueryError(f"{where}: expected an object, got {body!r}")
    return body


def _clauses(body: object, where: str) -> tuple[Node, ...]:
    items = body if isinstance(body, list) else [body]
    return tuple(_clause(c, f"{where}[{i}]") for i, c in enumerate(items))


def _bool(body: object, where: str) -> Node:
    given = _mapping(body, where)
    unknown = set(given) - {"must", "filter", "should", "must_not", "minimum_should_match"}
    unknown -= _IGNORED
    if unknown:
        raise QueryError(f"{where}: unsupported key(s) {', '.join(sorted(unknown))}")
    must = _clauses(given.get("must", []), f"{where}.must")
    must += _clauses(given.get("filter", []), f"{where}.filter")
    should = _clauses(given.get("should", []), f"{where}.should")
    must_not = _clauses(given.get("must_not", []), f"{where}.must_not")
    least = given.get("minimum_should_match", 0 if must else 1)
    try:
        least = int(least)
    except (TypeError, ValueError):
        raise QueryError(f"{where}.minimum_should_match: expected an integer") from None
    if least < 0 or least > max(len(should), 1):
        raise QueryError(f"{where}.minimum_should_match: {least} of {len(should)} clauses")
    return _Bool(must, should, must_not, least)


def _field_body(
    body: object, where: str, key: str, options: set[str]
) -> tuple[_Field, Any, dict[str, Any]]:
    """A leaf clause's field, its value (plain, or ``key`` of its object form) and options."""
    name, value = _one(body, where)
    field = _field(name, f"{where}.{name}")
    extra: dict[str, Any] = {}
    if isinstance(value, Mapping):
        unknown = set(value) - {key} - options - _IGNORED
        if unknown:
            raise QueryError(f"{where}.{name}: unsupported option(s) {', '.join(sorted(unknown))}")
        if key not in value:
            raise QueryError(f"{where}.{name}: missing {key!r}")
        extra = {k: v for k, v in value.items() if k in options}
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QueryError(f"{where}.{name}: expected a string or a number, got {value!r}")
    return field, value, extra


def _field(name: str, where: str) -> _Field:
    if name in _TEXT_FIELDS:
        return _Field("text")
    if name in _LEVEL_FIELDS:
        return _Field("level")
    if name == "run" or name == "labels.run":
        return _Field("run")
    if name in _NODE_FIELDS:
        return _Field("label", "node")
    if name == "rank":
        return _Field("label", "rank")
    if name.startswith("labels.") and len(name) > len("labels."):
        return _Field("label", name.removeprefix("labels."))
    if name in _TIME_FIELDS:
        raise QueryError(f"{where}: the time takes a range clause")
    raise QueryError(
        f"{where}: unknown field {name!r}; fields: message, level, node (host.name), rank, run, "
        "labels.<name>, @timestamp (in range)"
    )


def _text(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _match(body: object, where: str) -> Node:
    field, value, extra = _field_body(body, where, "query", {"operator"})
    operator = str(extra.get("operator", "and")).lower()
    if operator not in ("and", "or"):
        raise QueryError(f"{where}: operator must be 'and' or 'or', got {operator!r}")
    text = _text(value)
    if field.kind != "text":
        return _Equals(field, (text,), fold=True)
    return _Words(tuple(dict.fromkeys(w.lower() for w in _WORD.findall(text))), operator == "or")


def _phrase(body: object, where: str) -> Node:
    field, value, _ = _field_body(body, where, "query", set())
    text = _text(value)
    if field.kind != "text":
        return _Equals(field, (text,), fold=True)
    return _Words((text.lower(),), any=False) if text else _Words((), any=False)


def _term(body: object, where: str) -> Node:
    field, value, extra = _field_body(body, where, "value", {"case_insensitive"})
    fold = field.kind == "level" or bool(extra.get("case_insensitive", False))
    return _Equals(field, (_text(value),), fold)


def _terms(body: object, where: str) -> Node:
    name, values = _one(body, where)
    field = _field(name, f"{where}.{name}")
    if not isinstance(values, list) or not values:
        raise QueryError(f"{where}.{name}: expected a non-empty list of values")
    if any(isinstance(v, (bool, dict, list)) or v is None for v in values):
        raise QueryError(f"{where}.{name}: values must be strings or numbers")
    return _Equals(field, tuple(_text(v) for v in values), fold=field.kind == "level")


def _regexp(body: object, where: str) -> Node:
    field, value, extra = _field_body(body, where, "value", {"case_insensitive", "flags"})
    pattern = ("(?i)" if extra.get("case_insensitive") else "") + str(value)
    try:
        compile_regex(pattern)
    except ValueError as exc:
        raise QueryError(f"{where}: {exc}") from None
    return _Regex(field, pattern)


def _range(body: object, where: str) -> Node:
    name, spec = _one(body, where)
    here = f"{where}.{name}"
    if name not in _TIME_FIELDS:
        raise QueryError(f"{here}: range applies to @timestamp (or ts) only")
    spec = _mapping(spec, here)
    unknown = set(spec) - {"gte", "gt", "lte", "lt", "format", "time_zone"} - _IGNORED
    if unknown:
        raise QueryError(f"{here}: unsupported option(s) {', '.join(sorted(unknown))}")
    if spec.get("time_zone", "UTC") not in ("UTC", "Z", "+00:00"):
        raise QueryError(f"{here}.time_zone: only UTC is supported")
    fmt = spec.get("format")
    if fmt not in (None, "epoch_millis", "epoch_second", "strict_date_optional_time"):
        raise QueryError(f"{here}.format: use epoch_millis, epoch_second or an ISO date")
    millis = fmt == "epoch_millis" or (fmt is None and name in _MILLIS_FIELDS)
    bounds = []
    for op in ("gte", "gt", "lte", "lt"):
        if (given := spec.get(op)) is None:
            continue
        bound = _bound(given, op, millis, f"{here}.{op}")
        bound.seconds(0.0)  # a date that does not parse is refused now, not at search time
        bounds.append(bound)
    return _Range(tuple(bounds))


def _bound(given: object, op: str, millis: bool, where: str) -> _Bound:
    round_up = op in ("gt", "lte")  # as Elasticsearch rounds: lte now/d means to the day's end
    if isinstance(given, date):  # a YAML rule file's unquoted date
        given = given.isoformat()
    if isinstance(given, bool) or not isinstance(given, (str, int, float)):
        raise QueryError(f"{where}: expected a date, got {given!r}")
    if isinstance(given, str) and re.fullmatch(r"-?\d+(\.\d+)?", given):
        given = float(given)
    if isinstance(given, (int, float)):
        if not math.isfinite(given):
            raise QueryError(f"{where}: expected a finite time")
        return _Bound(op, float(given), millis, round_up)
    try:
        _date_math(given, 0.0, round_up, millis)
    except QueryError as exc:
        raise QueryError(f"{where}: {exc}") from None
    return _Bound(op, given, millis, round_up)


def _date_math(given: str, now: float, round_up: bool, millis: bool) -> float:
    """Seconds for ``now-5m``, ``now/d``, an ISO date or ``<date>||+1h`` (UTC)."""
    if given.startswith("now"):
        anchor, math_part = now, given[3:]
    else:
        base, _, math_part = given.partition("||")
        anchor = _instant(base, millis)
    at = anchor
    pos = 0
    while pos < len(math_part):
        step = _MATH.match(math_part, pos)
        if step is None:
            raise QueryError(f"bad date math {given!r}")
        if step.group(4):
            unit = _UNITS[step.group(4)]
            at = math.floor(at / unit) * unit + (unit - 0.001 if round_up else 0)
        else:
            sign = 1 if step.group(1) == "+" else -1
            at += sign * int(step.group(2)) * _UNITS[step.group(3)]
        pos = step.end()
    return at


def _instant(text: str, millis: bool) -> float:
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return float(text) / 1000 if millis else float(text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(f"bad date {text!r}: give an ISO 8601 date, epoch or now-...") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def with_filters(query: LogQuery | None, filters: Sequence[Mapping[str, Any]]) -> LogQuery:
    """``query`` (all lines when None) further limited by ``filters`` (bool ``filter`` clauses
    in the same form): how the search API adds its plain fields to a query."""
    base = {"match_all": {}} if query is None else json.loads(query.source)
    return parse_query({"bool": {"must": [base], "filter": list(filters)}})
