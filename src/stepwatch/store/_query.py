"""Reading series back: raw samples, min/max/last per bucket, the latest sample of each series.

Every function takes a cursor inside a read transaction and the watermark read
in that same transaction, so tier rows and raw rows never overlap or miss. The
cursor is the caller's to throw away (tables registered on it go with it).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from ..model import NO_STEP
from ._plan import Plan
from ._schema import TIERS

_NAN = "'nan'::DOUBLE"


def raw(
    cur: duckdb.DuckDBPyConnection,
    series_id: int,
    start: float | None,
    end: float | None,
    limit: int | None,
) -> dict[str, np.ndarray]:
    """Samples of one series in time order; missing steps come back as NO_STEP."""
    where: list[str] = ["series = ?"]
    params: list[object] = [series_id]
    for cond, bound in (("ts >= ?", start), ("ts <= ?", end)):
        if bound is not None:
            where.append(cond)
            params.append(bound)
    sql = (
        f"SELECT ts, coalesce(step, {NO_STEP}) AS step, value FROM samples "
        f"WHERE {' AND '.join(where)} ORDER BY ts, rid"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    got = cur.execute(sql, params).fetchnumpy()
    return {
        "ts": np.asarray(got["ts"], np.float64),
        "step": np.asarray(got["step"], np.int64),
        "value": np.asarray(got["value"], np.float64),
    }


def _raw_part(plan: Plan, where: str) -> str:
    finite = "FILTER (WHERE NOT isnan(value))"
    return f"""SELECT {plan.bucket_sql("ts")} AS qb, min(value) {finite} AS mn,
        max(value) {finite} AS mx,
        count(*) AS n, max({{'t': ts, 'r': rid, 'v': value}}) AS l
        FROM samples WHERE series = ? AND {where} GROUP BY qb"""


def downsample(
    cur: duckdb.DuckDBPyConnection, series_id: int, plan: Plan, watermark: int
) -> dict[str, np.ndarray]:
    """Exact min, max (NaN ignored), last and count per bucket of one series."""
    parts: list[str] = []
    params: list[object] = []
    tier = plan.tier_part()
    if tier is not None:
        parts.append(
            f"""SELECT {plan.tier_bucket_sql("b")} AS qb, mn, mx, n,
            {{'t': last_ts, 'r': last_rid, 'v': last_value}} AS l
            FROM rollup_{plan.tier} WHERE series = ? AND {tier[0]}"""
        )
        params += [series_id, *tier[1]]
    for where, p in plan.raw_parts(watermark):
        parts.append(_raw_part(plan, where))
        params += [series_id, *p]
    sql = f"""SELECT qb, coalesce(min(mn), {_NAN}) AS mn, coalesce(max(mx), {_NAN}) AS mx,
        coalesce(max(l).v, {_NAN}) AS last, sum(n)::BIGINT AS n
        FROM ({" UNION ALL ".join(parts)}) GROUP BY qb ORDER BY qb"""
    got = cur.execute(sql, params).fetchnumpy()
    return {
        "ts": plan.bucket_ts(np.asarray(got["qb"], np.int64)),
        "min": np.asarray(got["mn"], np.float64),
        "max": np.asarray(got["mx"], np.float64),
        "last": np.asarray(got["last"], np.float64),
        "count": np.asarray(got["n"], np.int64),
    }


def latest(
    cur: duckdb.DuckDBPyConnection, series_ids: list[int], watermark: int
) -> list[tuple[int, float, int, float]]:
    """(series id, ts, step, value) of the newest sample of each series that has one."""
    cur.register("_ids", pa.table({"series": pa.array(series_ids, pa.int32())}))
    rows = cur.execute(
        f"""SELECT series, l.t, coalesce(l.s, {NO_STEP}), l.v FROM (
                SELECT series, max(l) AS l FROM (
                    SELECT series, max({{'t': last_ts, 'r': last_rid,
                                          'v': last_value, 's': last_step}}) AS l
                    FROM rollup_{TIERS[-1]} JOIN _ids USING (series) GROUP BY series
                    UNION ALL
                    SELECT series, max({{'t': ts, 'r': rid, 'v': value, 's': step}})
                    FROM samples JOIN _ids USING (series) WHERE rid >= ? GROUP BY series)
                GROUP BY series) ORDER BY series""",
        [watermark],
    ).fetchall()
    return [(int(s), float(t), int(st), float(v)) for s, t, st, v in rows]


#: What each table of a dataset holds, its rows joined to their run's project; the Hive
#: partitions (project, run, day) are the last three columns. A row of no run or project
#: goes to the partition Hive reads as null.
_DATASETS = {
    "samples": """SELECT s.ts, c.name, s.value, s.step, c.node,
            TRY_CAST(c.rank AS BIGINT) AS rank, TRY_CAST(c.gpu AS BIGINT) AS gpu, c.labels,
            r.project, c.run, strftime(to_timestamp(s.ts), '%Y-%m-%d') AS day
        FROM samples s JOIN series c ON s.series = c.id LEFT JOIN runs r ON r.id = c.run""",
    "alerts": """SELECT a.ts, a.since, a.kind, a.severity, a.state, a.text, a.labels,
            json_extract_string(a.labels, '$.node') AS node,
            r.project, a.run, strftime(to_timestamp(a.ts), '%Y-%m-%d') AS day
        FROM alert_state a LEFT JOIN runs r ON r.id = a.run""",
    "gpus": """SELECT e.ts, json_extract_string(e.labels, '$.node') AS node,
            TRY_CAST(json_extract_string(e.labels, '$.gpu') AS BIGINT) AS gpu,
            json_extract_string(e.data, '$.name') AS model,
            json_extract_string(e.data, '$.uuid') AS uuid,
            TRY_CAST(json_extract(e.data, '$.memory_total_bytes') AS DOUBLE) AS memory_bytes,
            r.project, e.run, strftime(to_timestamp(e.ts), '%Y-%m-%d') AS day
        FROM events e LEFT JOIN runs r ON r.id = e.run WHERE e.kind = 'gpu_info'""",
    "runs": """SELECT r.id AS run_id, r.name, r.status, r.start, r."end", r.planned_total_steps,
            r.config, r.labels, r.project, r.id AS run,
            strftime(to_timestamp(r.start), '%Y-%m-%d') AS day
        FROM runs r""",
}


def export_dataset(
    cur: duckdb.DuckDBPyConnection, out: Path, project: str | None, runs: list[str] | None
) -> dict[str, int]:
    """Samples, alerts, GPUs (the agents' gpu_info: model, UUID, memory) and runs as
    Hive-partitioned Parquet datasets under ``out/<table>/``
    (``project=P/run=R/day=YYYY-MM-DD/``), of one project and/or runs; rows written each."""
    written = {}
    for table, select in _DATASETS.items():
        query = f"""SELECT * FROM ({select})
            WHERE ($1::VARCHAR IS NULL OR project = $1)
              AND ($2::VARCHAR[] IS NULL OR list_contains($2::VARCHAR[], run))"""
        (count,) = cur.execute(f"SELECT count(*) FROM ({query})", [project, runs]).fetchone() or (
            0,
        )
        written[table] = int(count)
        if count:
            out.mkdir(parents=True, exist_ok=True)
            cur.execute(
                f"""COPY ({query}) TO $3 (FORMAT parquet, COMPRESSION zstd,
                    PARTITION_BY (project, run, day), OVERWRITE_OR_IGNORE)""",
                [project, runs, str(out / table)],
            )
    return written


def export_parquet(cur: duckdb.DuckDBPyConnection, run_id: str, path: Path) -> None:
    """A run's samples, time ordered, with their series' columns, as one Parquet file."""
    # Numbered parameters: DuckDB 1.5 binds a ? after TO before those of the query.
    cur.execute(
        """COPY (
            SELECT s.ts, c.run, c.name, s.value, s.step, c.node,
                   TRY_CAST(c.rank AS BIGINT) AS rank, TRY_CAST(c.gpu AS BIGINT) AS gpu,
                   c.labels
            FROM samples s JOIN series c ON s.series = c.id
            WHERE c.run = $1 ORDER BY s.ts, s.rid
        ) TO $2 (FORMAT parquet, COMPRESSION zstd)""",
        [run_id, str(path)],
    )
