"""Log search over slices of the table: the same lines, in the same order, as one sort of every
matching line by time then eid, however the lines were stored and however small the slices."""

from __future__ import annotations

import random

import pytest

from stepwatch._log_query import parse_query
from stepwatch.model import Event, SeriesKey
from stepwatch.store import Store, _log_search

from .conftest import T0, batch

QUERIES = [
    {"match_all": {}},
    {"term": {"level": "warning"}},
    {"match": {"message": "NCCL"}},
    {"bool": {"filter": [{"term": {"node": "n1"}}, {"range": {"ts": {"gte": T0 + 100}}}]}},
    {"term": {"level": "critical"}},  # no line
]


def _lines() -> list[Event]:
    """Log lines out of time order (a late batch, equal times) and a few other events."""
    rnd = random.Random(7)
    lines = []
    for i in range(240):
        ts = T0 + rnd.choice([i, i, 50, 200.5])  # many lines on the same two times
        text = "NCCL WARN peer closed" if i % 7 == 0 else f"step {i}"
        level = "warning" if i % 5 == 0 else "info"
        labels = {"run": "r1", "node": f"n{i % 3}", "rank": str(i % 2)}
        lines.append(Event(ts, "log", text, labels, {"level": level}))
    lines.insert(30, Event(T0 + 40, "checkpoint", "NCCL checkpoint", {"run": "r1"}, {}))
    return lines


@pytest.fixture(params=["middle first", "newest first"])
def stored(request: pytest.FixtureRequest, store: Store) -> tuple[Store, list[tuple[int, Event]]]:
    """The store with the lines in batches out of time order; each line with its eid."""
    lines = _lines()
    if request.param == "middle first":
        parts = [lines[80:160], lines[160:], lines[:80]]
    else:
        parts = [lines[::-1][k : k + 40] for k in range(0, len(lines), 40)]
    key = SeriesKey.of("loss", {})
    for seq, part in enumerate(parts, 1):
        store.apply([batch([key], [], [], [], seq=seq, events=part)])
    in_order = [e for part in parts for e in part]
    return store, list(enumerate(in_order))


@pytest.mark.parametrize("first_slice", [1, 16, 1 << 18])
@pytest.mark.parametrize("newest_first", [True, False])
@pytest.mark.parametrize("limit", [1, 7, 60, 1000])
def test_slices_find_what_one_sort_finds(
    stored: tuple[Store, list[tuple[int, Event]]],
    monkeypatch: pytest.MonkeyPatch,
    first_slice: int,
    newest_first: bool,
    limit: int,
) -> None:
    store, numbered = stored
    monkeypatch.setattr(_log_search, "FIRST_SLICE", first_slice)
    now = T0 + 1000
    for body in QUERIES:
        query = parse_query(body)
        matching = [(e.ts, eid) for eid, e in numbered if e.kind == "log" and query.matches(e, now)]
        expected = [eid for _, eid in sorted(matching, reverse=newest_first)[:limit]]
        hits = store.search_logs(query, runs=None, limit=limit, newest_first=newest_first, now=now)
        assert [h.eid for h in hits] == expected, body
        assert [h.event for h in hits] == [numbered[eid][1] for eid in expected]


def test_an_empty_store_finds_nothing(store: Store) -> None:
    assert store.search_logs(parse_query({"match_all": {}}), now=T0) == []
