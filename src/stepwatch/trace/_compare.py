"""Traces against each other: the same job before and after a change (per-operator deltas),
and the ranks of one job (who arrives late at each collective, and which operator makes it
late)."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from ._report import OpStat, TraceReport

__all__ = ["Comparison", "OpDelta", "RankSkew", "compare_ranks", "compare_traces"]

#: Skews listed one by one (the summary covers all of them).
_LISTED_SKEWS = 1000


@dataclass(frozen=True)
class OpDelta:
    """An operator's (or kernel's) self time and calls in two traces, and the difference."""

    name: str
    before_us: float
    after_us: float
    delta_us: float
    before_calls: float
    after_calls: float


@dataclass(frozen=True)
class Comparison:
    """Two traces, after against before: per step when both recorded steps, else in total."""

    before: str
    after: str
    per_step: bool
    breakdown: dict[str, dict[str, float]]
    ops: list[OpDelta]
    kernels: list[OpDelta]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "compare", **asdict(self)}


@dataclass(frozen=True)
class RankSkew:
    """The ranks of one job side by side. Collectives are matched by their order on each
    rank; a rank's wait at one is its duration less the shortest rank's (the last to arrive
    waits least), so clocks need not agree across hosts. ``skews``: the first collectives'
    (index, skew in µs, late rank)."""

    ranks: list[dict[str, Any]]
    collectives: int
    skew_mean_us: float | None
    skew_p50_us: float | None
    skew_max_us: float | None
    late_rank: int | None
    late_count: int
    culprit: dict[str, Any] | None
    skews: list[tuple[int, float, int]]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "ranks", **asdict(self)}


def compare_traces(before: TraceReport, after: TraceReport) -> Comparison:
    """How ``after`` differs from ``before``: breakdown and every operator and kernel, the
    largest change first."""
    per_step = before.steps > 0 and after.steps > 0
    b_steps, a_steps = (before.steps, after.steps) if per_step else (1, 1)
    breakdown = {}
    for part in ("compute", "comm", "memcpy", "idle", "span_s"):
        b = getattr(before.breakdown, part) / b_steps
        a = getattr(after.breakdown, part) / a_steps
        breakdown[part] = {"before": b, "after": a, "delta": a - b}
    return Comparison(
        before=before.path,
        after=after.path,
        per_step=per_step,
        breakdown=breakdown,
        ops=_deltas(before.ops, after.ops, b_steps, a_steps),
        kernels=_deltas(before.kernels, after.kernels, b_steps, a_steps),
    )


def _deltas(before: list[OpStat], after: list[OpStat], b_steps: int, a_steps: int) -> list[OpDelta]:
    old, new = _by_name(before), _by_name(after)
    out = []
    for name in old.keys() | new.keys():
        (b_us, b_calls), (a_us, a_calls) = old.get(name, (0.0, 0)), new.get(name, (0.0, 0))
        b_us, a_us = b_us / b_steps, a_us / a_steps
        out.append(OpDelta(name, b_us, a_us, a_us - b_us, b_calls / b_steps, a_calls / a_steps))
    return sorted(out, key=lambda d: (-abs(d.delta_us), d.name))


def _by_name(stats: list[OpStat]) -> dict[str, tuple[float, int]]:
    return {s.name: (s.self_us, s.calls) for s in stats}


def compare_ranks(reports: list[TraceReport]) -> RankSkew | None:
    """The ranks of one job (their traces' ``distributedInfo.rank``, else their order):
    totals per rank, the skew before each collective, the rank most often last and the
    operator that takes it longer than the others' median. None for fewer than two."""
    if len(reports) < 2:
        return None
    ranks = [r.rank if r.rank is not None else i for i, r in enumerate(reports)]
    n = min(len(r.collective_us) for r in reports)
    late_counts: Counter[int] = Counter()
    waits: dict[int, float] = defaultdict(float)
    skews: list[float] = []
    listed: list[tuple[int, float, int]] = []
    for i in range(n):
        durations = [r.collective_us[i] for r in reports]
        shortest = min(durations)
        late = ranks[durations.index(shortest)]
        skew = max(durations) - shortest
        late_counts[late] += 1
        for rank, d in zip(ranks, durations, strict=True):
            waits[rank] += d - shortest
        skews.append(skew)
        if i < _LISTED_SKEWS:
            listed.append((i, skew, late))
    late_rank, late_count = late_counts.most_common(1)[0] if late_counts else (None, 0)
    table = [
        _rank_row(rank, r, late_counts[rank], waits[rank])
        for rank, r in zip(ranks, reports, strict=True)
    ]
    culprit = None
    if late_rank is not None:
        culprit = _culprit(
            reports[ranks.index(late_rank)],
            [r for k, r in zip(ranks, reports, strict=True) if k != late_rank],
        )
    return RankSkew(
        ranks=table,
        collectives=n,
        skew_mean_us=statistics.fmean(skews) if skews else None,
        skew_p50_us=statistics.median(skews) if skews else None,
        skew_max_us=max(skews) if skews else None,
        late_rank=late_rank,
        late_count=late_count,
        culprit=culprit,
        skews=listed,
    )


def _rank_row(rank: int, r: TraceReport, late: int, wait_us: float) -> dict[str, Any]:
    b = r.breakdown
    return {
        "rank": rank, "path": r.path, "span_s": b.span_s, "compute": b.compute, "comm": b.comm,
        "memcpy": b.memcpy, "idle": b.idle, "collectives": r.collectives, "times_late": late,
        "wait_s": wait_us / 1e6,
    }  # fmt: skip


def _culprit(late: TraceReport, others: list[TraceReport]) -> dict[str, Any] | None:
    """The operator or kernel whose self time per step on the late rank most exceeds the
    median of the other ranks'."""
    best: dict[str, Any] | None = None
    for pick in (lambda r: r.ops, lambda r: r.kernels):
        theirs = [_per_step(pick(o), o.steps) for o in others]
        for name, us in _per_step(pick(late), late.steps).items():
            if name == "ProfilerStep*":  # time outside any operator, not an operator
                continue
            median = statistics.median(t.get(name, 0.0) for t in theirs)
            if best is None or us - median > best["excess_us"]:
                best = {"name": name, "late_us": us, "others_median_us": median,
                        "excess_us": us - median}  # fmt: skip
    return best if best is not None and best["excess_us"] > 0 else None


def _per_step(stats: list[OpStat], steps: int) -> dict[str, float]:
    return {s.name: s.self_us / max(steps, 1) for s in stats}
