"""Min/max/last per bucket of many series in one query: small multiples and per-entity charts.

The same bucket arithmetic as ``_query.downsample`` (tier rows for whole tier
buckets inside the range, raw rows for the edges and past the watermark),
grouped by series as well, plus the step of each bucket's last sample so a
chart can put steps on its x axis. Only what the columns asked for need is
aggregated: a page of small multiples that draws "last" reads less than a
chart with bands.
"""

from __future__ import annotations

from collections.abc import Collection

import duckdb
import numpy as np
import pyarrow as pa

from ..model import NO_STEP
from ._plan import Plan

_NAN = "'nan'::DOUBLE"
_FINITE = "FILTER (WHERE NOT isnan(value))"
#: Partial aggregates: (from a tier row, over raw samples).
_PARTIAL = {
    "mn": ("mn", f"min(value) {_FINITE}"),
    "mx": ("mx", f"max(value) {_FINITE}"),
    "n": ("n", "count(*)"),
    "l": (
        "{'t': last_ts, 'r': last_rid, 'v': last_value, 's': last_step}",
        "max({'t': ts, 'r': rid, 'v': value, 's': step})",
    ),
}
#: The columns per bucket besides "ts": (the partial aggregate, how parts merge, dtype).
_COLUMNS: dict[str, tuple[str, str, type]] = {
    "min": ("mn", f"coalesce(min(mn), {_NAN})", np.float64),
    "max": ("mx", f"coalesce(max(mx), {_NAN})", np.float64),
    "last": ("l", f"coalesce(max(l).v, {_NAN})", np.float64),
    "step": ("l", f"coalesce(max(l).s, {NO_STEP})", np.int64),
    "count": ("n", "sum(n)::BIGINT", np.int64),
}
FIELDS = tuple(_COLUMNS)


def downsample_many(
    cur: duckdb.DuckDBPyConnection,
    series_ids: list[int],
    plan: Plan,
    watermark: int,
    fields: Collection[str] = FIELDS,
) -> dict[int, dict[str, np.ndarray]]:
    """Per series id: "ts" and the ``fields`` asked for of "min", "max", "last", "step"
    (NO_STEP where none) and "count"."""
    cur.register("_ids", pa.table({"series": pa.array(series_ids, pa.int32())}))
    wanted = [f for f in FIELDS if f in fields]
    used = list(dict.fromkeys(_COLUMNS[f][0] for f in wanted)) or ["n"]
    parts: list[str] = []
    params: list[object] = []
    tier = plan.tier_part()
    if tier is not None:
        cols = ", ".join(f"{_PARTIAL[k][0]} AS {k}" for k in used)
        parts.append(
            f"""SELECT series, {plan.tier_bucket_sql("b")} AS qb, {cols}
            FROM rollup_{plan.tier} JOIN _ids USING (series) WHERE {tier[0]}"""
        )
        params += tier[1]
    for where, p in plan.raw_parts(watermark):
        cols = ", ".join(f"{_PARTIAL[k][1]} AS {k}" for k in used)
        parts.append(
            f"""SELECT series, {plan.bucket_sql("ts")} AS qb, {cols}
            FROM samples JOIN _ids USING (series) WHERE {where} GROUP BY ALL"""
        )
        params += p
    merged = "".join(f", {_COLUMNS[f][1]} AS c_{f}" for f in wanted)
    got = cur.execute(
        f"""SELECT series, qb{merged}
        FROM ({" UNION ALL ".join(parts)}) GROUP BY ALL ORDER BY series, qb""",
        params,
    ).fetchnumpy()
    sid = np.asarray(got["series"], np.int64)
    cuts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]]) if sid.size else np.zeros(0, np.int64)
    bounds = np.r_[cuts, sid.size]
    columns = {"ts": plan.bucket_ts(np.asarray(got["qb"], np.int64))}
    columns.update({f: np.asarray(got[f"c_{f}"], _COLUMNS[f][2]) for f in wanted})
    return {
        int(sid[a]): {name: col[a:b] for name, col in columns.items()}
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    }
