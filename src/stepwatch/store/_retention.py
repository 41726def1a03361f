"""How long the store keeps raw samples, each rollup tier and ingested events.

Why these defaults: two weeks of raw samples cover the runs people still debug sample by
sample; a quarter of 10 s buckets covers the comparisons between recent runs; two years of
5 minute buckets keep every run's curves for the record. Ingested events (log lines,
checkpoints) are kept as long as the 10 s tier, so a chart of that age still shows them. The
collector's own records (alerts, acks, silences, commands, actions, audit) are hash-chained
and never deleted by retention.

Raw data goes only once it is rolled up, so a coarser tier is kept at least as long as a finer
one and every tier at least as long as raw samples; a query over a range whose raw samples are
gone is answered from the tiers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ._plan import Kept
from ._schema import TIERS

__all__ = ["DEFAULT_RETENTION", "Retention"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "y": 365 * 86_400}
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)([smhdwy])")
#: Less raw data than this would go before detection could replay it after a restart.
MIN_RAW_S = 3600
#: Every cut lies on a bucket boundary of the coarsest tier: no bucket loses part of its data.
_ALIGN = TIERS[-1]


def _duration(text: str) -> float:
    """Seconds of ``14d``, ``90d``, ``2y``, ``12h``... (a year is 365 days)."""
    found = _DURATION_RE.fullmatch(text.strip())
    if found is None or float(found.group(1)) <= 0:
        raise ValueError(
            f"bad duration {text!r} (a positive number and a unit: s, m, h, d, w or y; e.g. 14d)"
        )
    return float(found.group(1)) * _UNITS[found.group(2)]


def _words(seconds: float) -> str:
    """A duration in the largest whole unit of years, days, hours, minutes, seconds."""
    for unit, size in sorted(((u, n) for u, n in _UNITS.items() if u != "w"), key=lambda u: -u[1]):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _tier_name(tier: int) -> str:
    return f"{tier}s"


@dataclass(frozen=True, slots=True)
class Retention:
    """Seconds each kind of data is kept: raw samples, each tier of ``TIERS``, events."""

    raw_s: float = 14 * 86_400
    tiers_s: tuple[float, ...] = field(default=(90 * 86_400, 2 * 365 * 86_400))
    events_s: float = 90 * 86_400

    def __post_init__(self) -> None:
        if len(self.tiers_s) != len(TIERS):
            raise ValueError(f"retention needs one age per tier ({len(TIERS)})")
        if self.raw_s < MIN_RAW_S:
            raise ValueError(f"raw={_words(self.raw_s)} is under the 1h minimum")
        finer, kept = "raw samples", self.raw_s
        for tier, age in zip(TIERS, self.tiers_s, strict=True):
            if age < kept:
                raise ValueError(
                    f"the {_tier_name(tier)} tier ({_words(age)}) would go before {finer} "
                    f"({_words(kept)}): raw data goes only once rolled up, so each tier is "
                    "kept at least as long as raw samples and every finer tier"
                )
            finer, kept = f"the {_tier_name(tier)} tier", age

    @classmethod
    def parse(cls, spec: str) -> Retention:
        """``raw=14d,10s=90d,300s=2y,events=90d``; keys left out keep their defaults."""
        given: dict[str, float] = {}
        for part in (p.strip() for p in spec.split(",")):
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq:
                raise ValueError(f"{part!r} has no key: write KEY=AGE, e.g. raw={part or '14d'}")
            if key not in _KEYS:
                raise ValueError(f"unknown key {key!r}: one of {', '.join(_KEYS)}")
            if key in given:
                raise ValueError(f"{key} is given twice")
            try:
                given[key] = _duration(value)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        base = DEFAULT_RETENTION
        return cls(
            given.get("raw", base.raw_s),
            tuple(
                given.get(_tier_name(t), age) for t, age in zip(TIERS, base.tiers_s, strict=True)
            ),
            given.get("events", base.events_s),
        )

    def __str__(self) -> str:
        tiers = "".join(
            f",{_tier_name(t)}={_words(a)}" for t, a in zip(TIERS, self.tiers_s, strict=True)
        )
        return f"raw={_words(self.raw_s)}{tiers},events={_words(self.events_s)}"

    def cutoffs(self, now: float) -> Kept:
        """Where each kind of data begins at ``now``: everything before goes."""

        def cut(age: float) -> float:
            return float(math.floor((now - age) / _ALIGN) * _ALIGN)

        return Kept(cut(self.raw_s), tuple(cut(a) for a in self.tiers_s), cut(self.events_s))


_KEYS = ("raw", *(_tier_name(t) for t in TIERS), "events")
DEFAULT_RETENTION = Retention()
