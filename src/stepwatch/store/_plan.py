"""How a query range splits into buckets, and which part pre-aggregated tiers answer.

Buckets lie on a fixed grid (multiples of the bucket width since the epoch) so
that a chart that pans keeps its buckets. When the width is a multiple of a
tier, tier rows for tier buckets wholly inside the range answer the middle;
raw samples answer the two partial edges and every row past the watermark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ._schema import TIERS, tier_sql

#: A coarser tier is used when its bucket width overshoots the wanted one by at most this factor.
_SLACK = 1.25

Part = tuple[str, list[object]]


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


def plan(start: float, end: float, points: int, tiers: tuple[int, ...] = TIERS) -> Plan:
    """Choose about ``points`` buckets over [start, end], on the coarsest tier that fits."""
    if not (math.isfinite(start) and math.isfinite(end)) or end < start:
        raise ValueError(f"need finite start <= end, got [{start}, {end}]")
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    want = (end - start) / points
    fitting = [t for t in tiers if t <= want]
    if not fitting:
        width = want if want > 0 else 1.0
        return Plan(start, end, width, origin=math.floor(start / width) * width)
    tier = next(
        (t for t in reversed(fitting) if math.ceil(want / t) * t <= _SLACK * want), fitting[0]
    )
    k = math.ceil(want / tier)
    ja, jb = math.ceil(start / tier), math.floor(end / tier)
    return Plan(start, end, float(k * tier), tier, k, ja, jb)
