"""Context around log search hits: each hit's nearest lines of its own stream (run, node, rank)
within five minutes, read for a whole page at once; the same lines as asking hit by hit."""

from __future__ import annotations

import pytest

from stepwatch._log_query import parse_query
from stepwatch.model import Event, SeriesKey
from stepwatch.store import Store, _log_context
from stepwatch.store._log_context import CONTEXT_SPAN_S

from .conftest import T0, batch

STREAMS = [
    {"run": "r1", "node": "n1", "rank": "0"},
    {"run": "r1", "node": "n1", "rank": "1"},
    {"run": "r2", "node": "n1", "rank": "0"},  # another run on the same node and rank
    {"node": "n1", "rank": "0"},  # a node's line of no run
    {"run": "r1"},  # no node, no rank
    {"run": "r1", "node": "n1"},
]


def _lines() -> list[Event]:
    """Interleaved streams, lines on equal times, gaps longer than the span, and lines just
    inside and just outside a hit's span."""
    lines = []
    for i in range(150):
        labels = STREAMS[i % len(STREAMS)]
        ts = T0 + (i // 12) * 60.0 + (2000.0 if i >= 100 else 0.0)  # two a stream a time
        text = "ERROR boom" if i % 11 == 0 else f"line {i}"
        lines.append(Event(ts, "log", text, dict(labels), {"level": "info"}))
    at, stream = T0 + 9000, STREAMS[0]
    return [
        *lines,
        Event(at, "log", "same time, before", dict(stream), {}),
        Event(at, "log", "ERROR alone", dict(stream), {}),
        Event(at - CONTEXT_SPAN_S, "log", "just inside", dict(stream), {}),
        Event(at + CONTEXT_SPAN_S + 0.5, "log", "just outside", dict(stream), {}),
        Event(at, "log", "same time, after", dict(stream), {}),
        Event(at + 1, "checkpoint", "not a log line", dict(stream), {}),
    ]


def _expected(numbered: list[tuple[int, Event]], eid: int, n: int) -> tuple[list[str], list[str]]:
    """A hit's context as the search defines it, line by line."""
    hit = numbered[eid][1]
    key = tuple(hit.labels.get(k) for k in ("run", "node", "rank"))
    near = sorted(
        (e.ts, i, e.text)
        for i, e in numbered
        if e.kind == "log"
        and tuple(e.labels.get(k) for k in ("run", "node", "rank")) == key
        and hit.ts - CONTEXT_SPAN_S <= e.ts <= hit.ts + CONTEXT_SPAN_S
    )
    at = near.index((hit.ts, eid, hit.text))
    return [t for *_, t in near[max(0, at - n) : at]], [t for *_, t in near[at + 1 : at + 1 + n]]


@pytest.mark.parametrize(("clusters", "streams"), [(64, 64), (1, 64), (64, 1)])
@pytest.mark.parametrize("n", [1, 3])
def test_each_hit_gets_the_nearest_lines_of_its_stream(
    store: Store, monkeypatch: pytest.MonkeyPatch, clusters: int, streams: int, n: int
) -> None:
    """One query for the page, a query per cluster, and clusters read without label tests
    give the same context."""
    monkeypatch.setattr(_log_context, "CLUSTERS", clusters)
    monkeypatch.setattr(_log_context, "_STREAMS", streams)
    lines = _lines()
    store.apply([batch([SeriesKey.of("loss", {})], [], [], [], events=lines)])
    numbered = list(enumerate(lines))
    hits = store.search_logs(parse_query({"match": {"message": "error"}}), limit=100, context=n)
    assert {h.event.text for h in hits} == {"ERROR boom", "ERROR alone"}
    assert len(hits) == 15
    for hit in hits:
        before, after = _expected(numbered, hit.eid, n)
        assert ([e.text for e in hit.before], [e.text for e in hit.after]) == (before, after)
        assert all(e.labels == hit.event.labels for e in hit.before + hit.after)
    alone = next(h for h in hits if h.event.text == "ERROR alone")
    assert [e.text for e in alone.before] == ["just inside", "same time, before"][-n:]
    assert [e.text for e in alone.after] == ["same time, after"]


def test_no_context_asked_reads_none(store: Store) -> None:
    store.apply([batch([SeriesKey.of("loss", {})], [], [], [], events=_lines())])
    (hit,) = store.search_logs(parse_query({"match": {"message": "alone"}}))
    assert (hit.before, hit.after) == ([], [])
