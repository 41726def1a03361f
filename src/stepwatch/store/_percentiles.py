"""Percentiles across many series per time bucket, from log-bucketed histograms.

Accuracy: a value v falls in bin round(ln|v| / ln 1.02) (sign kept, 0 its own
bin), whose centre 1.02**bin is within 1% of v. A quantile is read like
numpy's default (linear) one, interpolating between the two neighbouring order
statistics, each replaced by its bin centre; so for data of one sign the
result is within 1% of ``numpy.quantile`` on the same finite samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ._catalogue import Catalogue, SeriesInfo
from ._plan import Plan
from ._schema import BIN_OFFSET, LN_GAMMA, bin_sql

_MAX_EXP = float(np.log(np.finfo(np.float64).max))


@dataclass(frozen=True, slots=True)
class Buckets:
    """Histogram counts per (label index, bucket, bin), sorted in that order."""

    lbl: np.ndarray
    qb: np.ndarray
    bin: np.ndarray
    n: np.ndarray


def histogram(
    cur: duckdb.DuckDBPyConnection,
    plan: Plan,
    watermark: int,
    series_lbl: pa.Table,
    group_lbl: pa.Table | None,
) -> Buckets:
    """Counts per bin from the histogram tier (when ``group_lbl`` maps groups) plus raw samples.

    Registers its label maps on ``cur``, which the caller throws away afterwards.
    """
    parts: list[str] = []
    params: list[object] = []
    tier = plan.tier_part() if group_lbl is not None else None
    if tier is not None:
        cur.register("_gmap", group_lbl)
        parts.append(
            f"""SELECT m.lbl, {plan.tier_bucket_sql("h.b")} AS qb, h.bin, h.n
            FROM hist_{plan.tier} h JOIN _gmap m ON h.grp = m.grp WHERE {tier[0]}"""
        )
        params += tier[1]
    cur.register("_smap", series_lbl)
    for where, p in (plan if tier is not None else plan.raw_only()).raw_parts(watermark):
        parts.append(
            f"""SELECT m.lbl, {plan.bucket_sql("s.ts")} AS qb, {bin_sql("s.value")} AS bin,
            count(*) AS n FROM samples s JOIN _smap m ON s.series = m.series
            WHERE isfinite(s.value) AND {where} GROUP BY ALL"""
        )
        params += p
    got = cur.execute(
        f"""SELECT lbl, qb, bin, sum(n)::BIGINT AS n FROM ({" UNION ALL ".join(parts)})
        GROUP BY ALL ORDER BY lbl, qb, bin""",
        params,
    ).fetchnumpy()
    return Buckets(*(np.asarray(got[c], np.int64) for c in ("lbl", "qb", "bin", "n")))


def bin_centre(bins: np.ndarray) -> np.ndarray:
    """The value each bin stands for: +-1.02**index, 0 for bin 0."""
    exponent = np.minimum((np.abs(bins) - BIN_OFFSET) * LN_GAMMA, _MAX_EXP)
    return np.where(bins == 0, 0.0, np.sign(bins) * np.exp(exponent))


@dataclass(frozen=True, slots=True)
class Quantiles:
    """Per (label, bucket) segment: the label index, bucket index, sample count and quantiles."""

    lbl: np.ndarray
    qb: np.ndarray
    count: np.ndarray
    q: dict[float, np.ndarray]


def quantiles(h: Buckets, qs: Sequence[float]) -> Quantiles:
    """Linear-interpolated quantiles of every (label, bucket) segment, all segments at once."""
    if h.n.shape[0] == 0:
        empty = np.zeros(0, np.int64)
        return Quantiles(empty, empty, empty, {q: np.zeros(0) for q in qs})
    first = np.flatnonzero(np.r_[True, (h.lbl[1:] != h.lbl[:-1]) | (h.qb[1:] != h.qb[:-1])])
    cum = np.cumsum(h.n)
    before = np.r_[0, cum][first]
    count = np.r_[cum[first[1:] - 1], cum[-1]] - before
    centre = bin_centre(h.bin)
    out = {}
    for q in qs:
        rank = q * (count - 1)
        lo, hi = np.floor(rank), np.ceil(rank)
        v_lo = centre[np.searchsorted(cum, before + lo, side="right")]
        v_hi = centre[np.searchsorted(cum, before + hi, side="right")]
        frac = rank - lo
        out[q] = v_lo * (1.0 - frac) + v_hi * frac
    return Quantiles(h.lbl[first], h.qb[first], count, out)


def label_maps(
    cur: duckdb.DuckDBPyConnection, cat: Catalogue, chosen: list[SeriesInfo], by: str | None
) -> tuple[list[str | None], pa.Table, pa.Table | None]:
    """The ``by`` values, and series -> value index (and group -> index when groups are whole)."""
    found = {i.key.label(by) for i in chosen} if by else set()
    values: list[str | None] = sorted(found, key=lambda v: v or "") if by else [None]
    index = {v: n for n, v in enumerate(values)}
    lbl = [index[i.key.label(by) if by else None] for i in chosen]
    ids = pa.array([i.id for i in chosen], pa.int32())
    series_lbl = pa.table({"series": ids, "lbl": pa.array(lbl, pa.int32())})
    grp_of, size = cat.groups_of(cur, [i.id for i in chosen])
    if not _whole_groups(chosen, grp_of, size, by):
        return values, series_lbl, None
    groups = {grp_of[i.id]: n for i, n in zip(chosen, lbl, strict=True)}
    group_lbl = pa.table(
        {
            "grp": pa.array(list(groups), pa.int32()),
            "lbl": pa.array(list(groups.values()), pa.int32()),
        }
    )
    return values, series_lbl, group_lbl


def _whole_groups(
    chosen: list[SeriesInfo], grp_of: dict[int, int], size: dict[int, int], by: str | None
) -> bool:
    """True when ``chosen`` is a union of whole histogram groups, each with one ``by`` value."""
    counts: dict[int, int] = {}
    values: dict[int, set[str | None]] = {}
    for info in chosen:
        grp = grp_of[info.id]
        counts[grp] = counts.get(grp, 0) + 1
        values.setdefault(grp, set()).add(info.key.label(by) if by else None)
    return all(n == size[g] and len(values[g]) == 1 for g, n in counts.items())


def entries(
    values: list[str | None], by: str | None, plan: Plan, res: Quantiles
) -> list[dict[str, Any]]:
    """One result entry per ``by`` value (one in all when ``by`` is None)."""
    out = []
    for n, value in enumerate(values):
        sel = res.lbl == n
        out.append(
            {
                "labels": {} if by is None or value is None else {by: value},
                "ts": plan.bucket_ts(res.qb[sel]),
                "count": res.count[sel],
                "q": {q: arr[sel] for q, arr in res.q.items()},
            }
        )
    return out
