"""How a query range splits into buckets, and which part pre-aggregated tiers answer.

Buckets lie on a fixed grid (multiples of the bucket width since the epoch) so
that a chart that pans keeps its buckets. When the width is a multiple of a
tier, tier rows for tier buckets wholly inside the range answer the middle;
raw samples answer the two partial edges and every row past the watermark.

Retention cuts each table at a horizon (``Kept``), always on a bucket boundary of the
coarsest tier. A tier is used only when it still holds the range's start; a range that
begins before raw samples are kept is answered by whole tier buckets (its edge buckets
count all their samples, also those just outside the range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ._schema import TIERS, tier_sql

#: A coarser tier is used when its bucket width overshoots the wanted one by at most this factor.
_SLACK = 1.25

Part = tuple[str, list[object]]
_NONE_CUT = -math.inf


@dataclass(frozen=True, slots=True)
class Kept:
    """Where the data of each table begins (seconds): retention deleted everything before."""

    raw: float = _NONE_CUT
    tiers: tuple[float, ...] = (_NONE_CUT,) * len(TIERS)
    events: float = _NONE_CUT

    def tier(self, tier: int) -> float:
        """Where the rows of a tier begin (one not in ``TIERS`` is never cut)."""
        return self.tiers[TIERS.index(tier)] if tier in TIERS else _NONE_CUT

    def at_least(self, other: Kept) -> Kept:
        """Each horizon the later of the two: horizons only move forward."""
        return Kept(
            max(self.raw, other.raw),
            tuple(max(a, b) for a, b in zip(self.tiers, other.tiers, strict=True)),
            max(self.events, other.events),
        )


#: Nothing deleted yet.
EVERYTHING = Kept()


@dataclass(frozen=True, slots=True)
class Plan:
    """Buckets of one query: their width, the tier that answers, and the raw remainder."""

    start: float
    end: float
    width: float
    tier: int | None = None
    k: int = 1
    ja: int = 0
    jb: int = 0
    origin: float = 0.0

    def bucket_sql(self, ts: str) -> str:
        """SQL for the bucket index of a raw sample's timestamp column."""
        if self.tier is None:
            return f"floor(({ts} - {self.origin!r}) / {self.width!r})::BIGINT"
        return f"floor({tier_sql(ts, self.tier)} / {self.k})::BIGINT"

    def tier_bucket_sql(self, b: str) -> str:
        """SQL for the bucket index of a tier row with tier bucket column ``b``."""
        return f"floor({b} / {self.k})::BIGINT"

    def tier_part(self) -> Part | None:
        """Where clause and parameters selecting the tier rows this plan merges, if any."""
        if self.tier is None or self.jb <= self.ja:
            return None
        return "b >= ? AND b < ?", [self.ja, self.jb]

    def raw_parts(self, watermark: int) -> list[Part]:
        """Where clauses over samples for every row in range that no merged tier row holds."""
        t = self.tier
        if t is None or self.jb <= self.ja:
            return [("ts >= ? AND ts <= ?", [self.start, self.end])]
        a, b, j = self.ja * t, self.jb * t, tier_sql("ts", t)
        return [
            (f"ts >= ? AND ts < ? AND {j} < ?", [self.start, a + t, self.ja]),
            (f"ts >= ? AND ts <= ? AND {j} >= ?", [b - t, self.end, self.jb]),
            (
                f"rid >= ? AND ts >= ? AND ts < ? AND {j} >= ? AND {j} < ?",
                [watermark, a - t, b + t, self.ja, self.jb],
            ),
        ]

    def raw_only(self) -> Plan:
        """The same buckets, answered from raw samples alone."""
        return replace(self, ja=0, jb=0)

    def bucket_ts(self, qb: np.ndarray) -> np.ndarray:
        """Start time of each bucket index."""
        return self.origin + qb.astype(np.float64) * self.width


def _choose(want: float, tiers: tuple[int, ...]) -> int:
    """The coarsest tier whose bucket overshoots ``want`` by at most the slack, else the finest."""
    return next((t for t in reversed(tiers) if math.ceil(want / t) * t <= _SLACK * want), tiers[0])


def plan(
    start: float,
    end: float,
    points: int,
    tiers: tuple[int, ...] = TIERS,
    kept: Kept = EVERYTHING,
) -> Plan:
    """Choose about ``points`` buckets over [start, end], on the coarsest tier that fits and
    still holds ``start``."""
    if not (math.isfinite(start) and math.isfinite(end)) or end < start:
        raise ValueError(f"need finite start <= end, got [{start}, {end}]")
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    want = (end - start) / points
    held = tuple(t for t in tiers if kept.tier(t) <= math.floor(start / t) * t)
    if start < kept.raw:
        return _whole_buckets(start, end, want, held or tiers[-1:], kept)
    fitting = tuple(t for t in held if t <= want)
    if not fitting:
        width = want if want > 0 else 1.0
        return Plan(start, end, width, origin=math.floor(start / width) * width)
    tier = _choose(want, fitting)
    k = math.ceil(want / tier)
    ja, jb = math.ceil(start / tier), math.floor(end / tier)
    return Plan(start, end, float(k * tier), tier, k, ja, jb)


def _whole_buckets(
    start: float, end: float, want: float, held: tuple[int, ...], kept: Kept
) -> Plan:
    """Before the raw horizon only tier rows hold data: the tier buckets at the edges count
    whole (raw samples answer an edge only where they are still kept)."""
    tier = _choose(want, tuple(t for t in held if t <= want) or held[:1])
    k = max(1, math.ceil(want / tier))
    ja = math.floor(start / tier)
    jb = math.ceil(end / tier) if end < kept.raw else math.floor(end / tier)
    return Plan(start, end, float(k * tier), tier, k, ja, jb)
