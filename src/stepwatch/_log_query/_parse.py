"""Reading Elasticsearch's bool form into the query tree, with an error that names the clause."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any

from .._regex import compile_regex
from ._dates import date_math
from ._errors import QueryError
from ._tree import (
    LogQuery,
    Node,
    _All,
    _Bool,
    _Bound,
    _Equals,
    _Field,
    _Range,
    _Regex,
    _Words,
)

_TEXT_FIELDS = frozenset({"message", "text", "log", "msg"})
_LEVEL_FIELDS = frozenset({"level", "log.level", "severity"})
_NODE_FIELDS = frozenset({"node", "host.name", "hostname", "host"})
#: Time fields whose bare numbers are epoch milliseconds, as in Elasticsearch.
_MILLIS_FIELDS = frozenset({"@timestamp", "timestamp"})
_TIME_FIELDS = _MILLIS_FIELDS | {"ts"}
#: Options any clause may carry that change nothing here.
_IGNORED = frozenset({"boost", "_name"})
_WORD = re.compile(r"\w+")


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
        date_math(given, 0.0, round_up, millis)
    except QueryError as exc:
        raise QueryError(f"{where}: {exc}") from None
    return _Bound(op, given, millis, round_up)


def plain_filters(
    *,
    q: str | None = None,
    regex: str | None = None,
    run: str | None = None,
    node: str | None = None,
    rank: str | None = None,
    level: str | None = None,
    start: float | None = None,
    end: float | None = None,
) -> list[dict[str, Any]]:
    """Plain search fields as bool ``filter`` clauses (None: not filtered): the phrase ``q``
    anywhere in the line ignoring case, a pattern, exact labels, a level and a time range."""
    out: list[dict[str, Any]] = []
    if q:
        out.append({"match_phrase": {"message": q}})
    if regex:
        out.append({"regexp": {"message": regex}})
    for name, value in (("run", run), ("node", node), ("rank", rank), ("level", level)):
        if value is not None:
            out.append({"term": {name: value}})
    if start is not None or end is not None:
        bounds = {"gte": start} if start is not None else {}
        out.append({"range": {"ts": bounds | ({"lte": end} if end is not None else {})}})
    return out


def with_filters(query: LogQuery | None, filters: Sequence[Mapping[str, Any]]) -> LogQuery:
    """``query`` (all lines when None) further limited by ``filters`` (bool ``filter`` clauses
    in the same form): how the search API adds its plain fields to a query."""
    base = {"match_all": {}} if query is None else json.loads(query.source)
    return parse_query({"bool": {"must": [base], "filter": list(filters)}})
