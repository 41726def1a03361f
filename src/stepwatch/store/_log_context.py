"""The lines around log search hits, read for a page of hits at once.

A hit's context is the ``n`` nearest lines before and after it (by time, then eid) of its
stream (the same run, node and rank) within ``CONTEXT_SPAN_S`` of it. Asking that hit by hit
took two queries a hit (about 30 ms a hit at 10 M lines). Here the hits' spans are merged
into clusters, and one query reads them all (up to ``CLUSTERS``): each cluster a range scan
(its row groups' min/max time skip the rest), keeping only the lines that hold a hit's node
and rank as the store writes them. The lines of each stream are numbered in order, and a
hit's context is the lines numbered within ``n`` of its own: a join on the number, so the
answer is at most ``2n`` lines a hit however busy the stream.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from .._event_json import json_member
from ..model import Event

__all__ = ["CLUSTERS", "COLUMNS", "CONTEXT_SPAN_S", "LogHit", "add_context", "event_of"]

#: Context comes from this many seconds either side of a hit: the bound keeps its cost to the
#: few row groups of that time (their min/max ts skip the rest).
CONTEXT_SPAN_S = 300.0

#: Clusters read by one query: a page of hits spread over a day is one or two queries.
CLUSTERS = 64

#: A cluster whose hits have more streams than this reads all lines in its span (parsing
#: their labels) rather than testing each line for every stream's labels.
_STREAMS = 64

_LABELS = ("node", "rank")

#: The columns a line is read with, in the order ``event_of`` takes them.
COLUMNS = "ts, text, labels, data, eid"


@dataclass(slots=True)
class LogHit:
    """A matching line, its number in the store, and the lines of its stream around it."""

    event: Event
    eid: int
    before: list[Event] = field(default_factory=list)
    after: list[Event] = field(default_factory=list)


def event_of(row: tuple[Any, ...]) -> Event:
    """The log event of a row that starts with ``COLUMNS``."""
    ts, text, labels, data = row[:4]
    return Event(float(ts), "log", str(text), json.loads(str(labels)), json.loads(str(data)))


def add_context(cur: duckdb.DuckDBPyConnection, hits: Sequence[LogHit], n: int) -> None:
    """Fill each hit's ``before`` and ``after``: the ``n`` nearest lines of its stream each
    side, oldest first."""
    order = sorted(range(len(hits)), key=lambda i: hits[i].event.ts)
    clusters: list[tuple[float, float, list[int]]] = []
    for i in order:
        ts = hits[i].event.ts
        if clusters and ts - CONTEXT_SPAN_S <= clusters[-1][1]:
            lo, _, members = clusters[-1]
            clusters[-1] = (lo, ts + CONTEXT_SPAN_S, [*members, i])
        else:
            clusters.append((ts - CONTEXT_SPAN_S, ts + CONTEXT_SPAN_S, [i]))
    for start in range(0, len(clusters), CLUSTERS):
        _read(cur, hits, clusters[start : start + CLUSTERS], n)


def _needles(hit: LogHit) -> tuple[str, ...]:
    """The JSON text of the hit's node and rank labels as the store writes them."""
    labels = hit.event.labels
    return tuple(json_member(k, labels[k]) for k in _LABELS if k in labels)


def _scan(
    hits: Sequence[LogHit], lo: float, hi: float, members: list[int], params: list[object]
) -> str:
    """SQL: the log lines of one cluster's span that may be of one of its hits' streams."""
    params.extend([lo, hi])
    sql = f"SELECT {COLUMNS}, run FROM events WHERE kind = 'log' AND ts BETWEEN ? AND ?"
    streams = {_needles(hits[i]) for i in members}
    if () in streams or len(streams) > _STREAMS:
        return sql
    tests = []
    for needles in sorted(streams):
        tests.append("(" + " AND ".join(["contains(labels, ?)"] * len(needles)) + ")")
        params.extend(needles)
    return f"{sql} AND ({' OR '.join(tests)})"


def _read(
    cur: duckdb.DuckDBPyConnection,
    hits: Sequence[LogHit],
    clusters: list[tuple[float, float, list[int]]],
    n: int,
) -> None:
    """Fill the context of the hits of ``clusters`` with one query."""
    members = [i for _, _, m in clusters for i in m]
    params: list[object] = [
        members,
        [hits[i].eid for i in members],
        [hits[i].event.ts for i in members],
    ]
    scans = " UNION ALL ".join(_scan(hits, lo, hi, m, params) for lo, hi, m in clusters)
    node, rank = (f"json_extract_string(labels, '$.\"{k}\"')" for k in _LABELS)
    rows = cur.execute(
        f"""WITH h AS (SELECT unnest(?::BIGINT[]) AS i, unnest(?::BIGINT[]) AS heid,
                              unnest(?::DOUBLE[]) AS hts),
        s AS (SELECT *, dense_rank() OVER (ORDER BY run, node, rank) AS sid,
                     row_number() OVER (PARTITION BY run, node, rank ORDER BY ts, eid) AS pos
              FROM (SELECT *, {node} AS node, {rank} AS rank FROM ({scans}))),
        a AS (SELECT h.i, h.hts, s.sid, s.pos FROM h JOIN s ON s.eid = h.heid)
        SELECT {", ".join(f"s.{c.strip()}" for c in COLUMNS.split(","))}, a.i, k.k
        FROM a CROSS JOIN range({-n}, {n + 1}) AS k(k)
        JOIN s ON s.sid = a.sid AND s.pos = a.pos + k.k
        WHERE k.k <> 0 AND s.ts BETWEEN a.hts - {CONTEXT_SPAN_S!r} AND a.hts + {CONTEXT_SPAN_S!r}
        ORDER BY a.i, k.k""",
        params,
    ).fetchall()
    for row in rows:
        hit = hits[int(row[-2])]
        (hit.before if int(row[-1]) < 0 else hit.after).append(event_of(row))
