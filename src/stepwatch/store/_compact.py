"""Rolling raw samples into the tier tables.

Tier rows are partial aggregates: several rows for one bucket compose exactly
(min of mins, sum of counts, last by (ts, row id)), so compaction only ever
appends, late samples simply add a row, and queries merge with a GROUP BY.
"""

from __future__ import annotations

import duckdb

from ._schema import TIERS, bin_sql, tier_sql

_FINE = TIERS[0]


def _roll_rollups(cur: duckdb.DuckDBPyConnection, where: str, params: list[object]) -> None:
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _roll AS
        SELECT series, {tier_sql("ts", _FINE)}::BIGINT AS b,
               min(value) FILTER (WHERE NOT isnan(value)) AS mn,
               max(value) FILTER (WHERE NOT isnan(value)) AS mx,
               count(*) AS n,
               max({{'t': ts, 'r': rid, 'v': value, 's': step}}) AS l
        FROM samples WHERE {where} GROUP BY ALL""",
        params,
    )
    cur.execute(
        f"INSERT INTO rollup_{_FINE} SELECT series, b, mn, mx, n, l.t, l.r, l.v, l.s FROM _roll"
    )
    for tier in TIERS[1:]:
        cur.execute(
            f"""INSERT INTO rollup_{tier}
            SELECT series, b, mn, mx, n, l.t, l.r, l.v, l.s FROM (
                SELECT series, floor(b / {tier // _FINE})::BIGINT AS b, min(mn) AS mn,
                       max(mx) AS mx, sum(n) AS n, max(l) AS l
                FROM _roll GROUP BY ALL)"""
        )
    cur.execute("DROP TABLE _roll")


def _roll_histograms(cur: duckdb.DuckDBPyConnection, where: str, params: list[object]) -> None:
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _hist AS
        SELECT c.grp, {tier_sql("s.ts", _FINE)}::BIGINT AS b, {bin_sql("s.value")} AS bin,
               count(*) AS n
        FROM samples s JOIN series c ON s.series = c.id
        WHERE isfinite(s.value) AND {where} GROUP BY ALL""",
        params,
    )
    cur.execute(f"INSERT INTO hist_{_FINE} SELECT * FROM _hist")
    for tier in TIERS[1:]:
        cur.execute(
            f"""INSERT INTO hist_{tier}
            SELECT grp, floor(b / {tier // _FINE})::BIGINT, bin, sum(n) FROM _hist GROUP BY ALL"""
        )
    cur.execute("DROP TABLE _hist")


def roll(cur: duckdb.DuckDBPyConnection, where: str, params: list[object]) -> None:
    """Append partial aggregates of the samples ``where`` selects to every tier table."""
    _roll_rollups(cur, where, params)
    _roll_histograms(cur, where, params)


def compact_range(cur: duckdb.DuckDBPyConnection, lo: int, hi: int) -> None:
    """Roll rows with row id in [lo, hi) and move the watermark to ``hi``."""
    roll(cur, "rid >= ? AND rid < ?", [lo, hi])
    cur.execute("UPDATE meta SET value = ? WHERE key = 'watermark'", [hi])
