"""Min/max/last per bucket of many series in one query: small multiples and per-entity charts.

The same bucket arithmetic as ``_query.downsample`` (tier rows for whole tier
buckets inside the range, raw rows for the edges and past the watermark),
grouped by series as well, plus the step of each bucket's last sample so a
chart can put steps on its x axis.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from ..model import NO_STEP
from ._plan import Plan

_NAN = "'nan'::DOUBLE"


def downsample_many(
    cur: duckdb.DuckDBPyConnection, series_ids: list[int], plan: Plan, watermark: int
) -> dict[int, dict[str, np.ndarray]]:
    """Per series id: "ts", "min", "max", "last", "step" (NO_STEP where none), "count"."""
    cur.register("_ids", pa.table({"series": pa.array(series_ids, pa.int32())}))
    finite = "FILTER (WHERE NOT isnan(value))"
    parts: list[str] = []
    params: list[object] = []
    tier = plan.tier_part()
    if tier is not None:
        parts.append(
            f"""SELECT series, {plan.tier_bucket_sql("b")} AS qb, mn, mx, n,
            {{'t': last_ts, 'r': last_rid, 'v': last_value, 's': last_step}} AS l
            FROM rollup_{plan.tier} JOIN _ids USING (series) WHERE {tier[0]}"""
        )
        params += tier[1]
    for where, p in plan.raw_parts(watermark):
        parts.append(
            f"""SELECT series, {plan.bucket_sql("ts")} AS qb, min(value) {finite} AS mn,
            max(value) {finite} AS mx, count(*) AS n,
            max({{'t': ts, 'r': rid, 'v': value, 's': step}}) AS l
            FROM samples JOIN _ids USING (series) WHERE {where} GROUP BY ALL"""
        )
        params += p
    got = cur.execute(
        f"""SELECT series, qb, coalesce(min(mn), {_NAN}) AS mn, coalesce(max(mx), {_NAN}) AS mx,
        coalesce(max(l).v, {_NAN}) AS last, coalesce(max(l).s, {NO_STEP}) AS step,
        sum(n)::BIGINT AS n
        FROM ({" UNION ALL ".join(parts)}) GROUP BY ALL ORDER BY series, qb""",
        params,
    ).fetchnumpy()
    sid = np.asarray(got["series"], np.int64)
    cuts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]]) if sid.size else np.zeros(0, np.int64)
    bounds = np.r_[cuts, sid.size]
    out: dict[int, dict[str, np.ndarray]] = {}
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        out[int(sid[a])] = {
            "ts": plan.bucket_ts(np.asarray(got["qb"][a:b], np.int64)),
            "min": np.asarray(got["mn"][a:b], np.float64),
            "max": np.asarray(got["mx"][a:b], np.float64),
            "last": np.asarray(got["last"][a:b], np.float64),
            "step": np.asarray(got["step"][a:b], np.int64),
            "count": np.asarray(got["n"][a:b], np.int64),
        }
    return out
