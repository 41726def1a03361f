"""The bool-query reader: each clause, the source document's query as written, its errors, and
the store's SQL and the log rules' in-memory matcher agreeing on the same lines."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pytest

from stepwatch._log_query import QueryError, parse_query, with_filters
from stepwatch.detect import parse_rules
from stepwatch.detect.engine._log_rules import LogRule
from stepwatch.model import Event

NOW = 1_780_000_000.0
#: The query of the source document, verbatim.
SOURCE_QUERY = {
    "query": {
        "bool": {
            "must": [
                {"match": {"message": "CUDA out of memory"}},
                {"match": {"level": "ERROR"}},
            ]
        }
    }
}

LINES = [
    Event(NOW - 10, "log", "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB",
          {"run": "r1", "node": "n1", "rank": "0"}, {"level": "error"}),
    Event(NOW - 20, "log", "warning: cuda memory is running out", {"run": "r1", "node": "n2"},
          {"level": "warning"}),
    Event(NOW - 400, "log", "CUDA out of memory (retrying)", {"run": "r2", "node": "n1"},
          {"level": "ERROR"}),
    Event(NOW - 5, "log", "step 10 loss=2.31", {"run": "r2", "node": "n2", "rank": "3"}, {}),
    Event(NOW - 1, "log", "NCCL WARN connection closed by peer",
          {"run": "r1", "node": "n1", "rank": "1", "team": "x"}, {"level": 3}),
    Event(NOW - 3000, "log", "Traceback: out of memory: killed process 17", {}, {"level": "error"}),
]  # fmt: skip

CASES: list[tuple[Any, set[int]]] = [
    (SOURCE_QUERY, {0, 2}),
    (
        {
            "query": {
                "bool": {
                    **SOURCE_QUERY["query"]["bool"],
                    "filter": [{"range": {"@timestamp": {"gte": "now-5m"}}}],
                }
            }
        },
        {0},
    ),  # fmt: skip
    ({"match": {"message": "memory cuda"}}, {0, 1, 2}),
    ({"match": {"message": {"query": "nccl loss", "operator": "or"}}}, {3, 4}),
    ({"match_phrase": {"message": "out of memory"}}, {0, 2, 5}),
    ({"term": {"node": "n1"}}, {0, 2, 4}),
    ({"term": {"host.name": "N1"}}, set()),
    ({"term": {"host.name": {"value": "N1", "case_insensitive": True}}}, {0, 2, 4}),
    ({"match": {"node": "N1"}}, {0, 2, 4}),
    ({"terms": {"rank": ["0", 3]}}, {0, 3}),
    ({"term": {"labels.team": "x"}}, {4}),
    ({"term": {"level": "Error"}}, {0, 2, 5}),
    ({"term": {"log.level": "3"}}, set()),  # a level that is no string is no level
    ({"term": {"run": "r2"}}, {2, 3}),
    ({"regexp": {"message": "loss=[0-9.]+"}}, {3}),
    ({"regexp": {"message": {"value": "nccl warn", "case_insensitive": True}}}, {4}),
    ({"range": {"@timestamp": {"gte": (NOW - 30) * 1000, "lt": (NOW - 5) * 1000}}}, {0, 1}),
    ({"range": {"ts": {"gt": NOW - 20, "lte": NOW - 5}}}, {0, 3}),
    ({"range": {"@timestamp": {"gte": "now-1h", "lte": "now-6m"}}}, {2, 5}),
    ({"range": {"@timestamp": {"gte": "2026-05-28T00:00:00Z||-1d"}}}, set(range(6))),
    ({"bool": {"should": [{"term": {"node": "n2"}}, {"term": {"rank": "1"}}]}}, {1, 3, 4}),
    (
        {
            "bool": {
                "should": [
                    {"term": {"node": "n1"}},
                    {"term": {"run": "r1"}},
                    {"match": {"message": "cuda"}},
                ],
                "minimum_should_match": 2,
            }
        },
        {0, 1, 2, 4},
    ),  # fmt: skip
    (
        {"bool": {"must": [{"term": {"node": "n1"}}], "should": [{"term": {"rank": "9"}}]}},
        {0, 2, 4},
    ),  # fmt: skip
    (
        {"bool": {"must_not": [{"term": {"rank": "0"}}, {"term": {"level": "warning"}}]}},
        {2, 3, 4, 5},
    ),  # fmt: skip
    ({"bool": {"must_not": {"term": {"node": "n1"}}, "filter": {"match_all": {}}}}, {1, 3, 5}),
    ({"bool": {}}, set(range(6))),
]


@pytest.fixture(scope="module")
def events() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(
        """CREATE TABLE events (ts DOUBLE NOT NULL, kind VARCHAR NOT NULL, text VARCHAR NOT NULL,
        run VARCHAR, labels VARCHAR NOT NULL, data VARCHAR NOT NULL, eid BIGINT NOT NULL)"""
    )
    for i, e in enumerate(LINES):  # as the store writes them
        row = (e.ts, e.kind, e.text, e.labels.get("run"), json.dumps(e.labels, sort_keys=True),
               json.dumps(e.data, sort_keys=True), i)  # fmt: skip
        con.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", row)
    return con


def _sql(con: duckdb.DuckDBPyConnection, query: Any) -> set[int]:
    where, params = parse_query(query).where(NOW)
    return {r[0] for r in con.execute(f"SELECT eid FROM events WHERE {where}", params).fetchall()}


@pytest.mark.parametrize(("query", "want"), CASES)
def test_the_store_and_the_matcher_find_the_same_lines(
    events: duckdb.DuckDBPyConnection, query: Any, want: set[int]
) -> None:
    in_memory = {i for i, e in enumerate(LINES) if parse_query(query).matches(e, NOW)}
    assert in_memory == want
    assert _sql(events, query) == want


def test_plain_filters_narrow_a_query(events: duckdb.DuckDBPyConnection) -> None:
    narrowed = with_filters(parse_query(SOURCE_QUERY), [{"term": {"run": "r2"}}])
    where, params = narrowed.where(NOW)
    assert events.execute(f"SELECT eid FROM events WHERE {where}", params).fetchall() == [(2,)]
    everything = with_filters(None, [{"term": {"node": "n2"}}])
    assert {i for i, e in enumerate(LINES) if everything.matches(e, NOW)} == {1, 3}


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ({"fuzzy": {"message": "cuda"}}, "query.fuzzy: unsupported clause 'fuzzy'"),
        ({"bool": {"must": [{"wildcard": {"message": "c*"}}]}}, "query.bool.must[0].wildcard"),
        ({"bool": {"must": [], "boost_mode": 1}}, "unsupported key(s) boost_mode"),
        ({"match": {"pod": "x"}}, "unknown field 'pod'"),
        ({"match": {"message": {"query": "x", "fuzziness": 2}}}, "unsupported option(s) fuzziness"),
        ({"match": {"message": {"query": "x", "operator": "xor"}}}, "operator must be"),
        ({"range": {"level": {"gte": 1}}}, "range applies to @timestamp"),
        ({"range": {"@timestamp": {"gte": "yesterday"}}}, "bad date 'yesterday'"),
        ({"range": {"@timestamp": {"gte": "now-5q"}}}, "bad date math"),
        ({"regexp": {"message": "(a"}}, "query.regexp"),
        ({"regexp": {"message": "(a)\\1"}}, "query.regexp"),
        ({"term": {"node": ["a"]}}, "expected a string or a number"),
        ({"match": {"@timestamp": "now"}}, "the time takes a range clause"),
        ({"bool": {"should": [], "minimum_should_match": "x"}}, "minimum_should_match"),
        ({"match": {}, "term": {}}, "expected one clause"),
    ],
)
def test_a_query_it_cannot_take_is_refused_naming_the_clause(query: Any, names: str) -> None:
    with pytest.raises(QueryError, match=None) as caught:
        parse_query(query)
    assert names in str(caught.value)


RULE = """
groups:
  - name: saved
    rules:
      - alert: oom_errors
        signal:
          log: {query: %s}
          by: [node]
        severity: critical
"""


def test_a_log_rule_takes_the_source_query_verbatim_and_fires_on_its_lines() -> None:
    with_window = {"query": {"bool": {**SOURCE_QUERY["query"]["bool"],
                   "filter": [{"range": {"@timestamp": {"gte": "now-5m"}}}]}}}  # fmt: skip
    for given in (SOURCE_QUERY, with_window):
        (rule,) = parse_rules(RULE % json.dumps(given["query"]), "r.yaml", {}).rules
        assert rule.signal.log is not None
        log_rule = LogRule(rule, rule.signal.log)
        assert [i for i, e in enumerate(LINES) if log_rule.matches(e)] == [0, 2]
        alert = log_rule.fire(LINES[0])
        assert alert is not None and alert.labels["node"] == "n1"


def test_a_rule_with_a_bad_query_is_refused_where_it_stands() -> None:
    with pytest.raises(Exception, match=r"r.yaml:7.*unsupported clause 'fuzzy'"):
        parse_rules(RULE % '{"fuzzy": {"message": "x"}}', "r.yaml", {})
