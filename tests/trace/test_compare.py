"""Two traces compared (per-step deltas), and the ranks of one job at their collectives."""

from __future__ import annotations

import pytest

from stepwatch.trace import analyse_events, compare_ranks, compare_traces

from ._traces import gpu, op


def _steps(n: int, mm_us: float) -> list[dict]:
    events = []
    for i in range(n):
        t = 1000.0 * i
        events += [op(f"ProfilerStep#{i}", t, 900, cat="user_annotation"),
                   op("aten::mm", t + 10, mm_us), op("aten::relu", t + 500, 50)]  # fmt: skip
    return events


def test_compare_per_step() -> None:
    """Two steps before, four after, aten::mm 100 -> 300 µs a step: +200 µs a step."""
    c = compare_traces(analyse_events(_steps(2, 100), path="a"),
                       analyse_events(_steps(4, 300), path="b"))  # fmt: skip
    assert c.per_step and (c.before, c.after) == ("a", "b")
    mm = next(d for d in c.ops if d.name == "aten::mm")
    assert (mm.before_us, mm.after_us, mm.delta_us) == (100, 300, 200)
    assert (mm.before_calls, mm.after_calls) == (1, 1)
    assert c.ops[0].delta_us == -200  # the step's time outside operators: 750 -> 550 µs
    relu = next(d for d in c.ops if d.name == "aten::relu")
    assert relu.delta_us == 0
    assert c.breakdown["compute"]["delta"] == pytest.approx(200e-6)
    assert c.to_json()["kind"] == "compare"


def _rank(rank: int, nccl_us: list[float], slow_us: float) -> dict:
    events = [op("ProfilerStep#0", 0, 10_000, cat="user_annotation")]
    t = 0.0
    for d in nccl_us:
        events += [gpu("slow_kernel", t, slow_us), gpu("ncclKernel_AllReduce", t + slow_us, d)]
        t += slow_us + d + 10
    return {"events": events, "metadata": {"distributedInfo": {"rank": rank, "world_size": 3}}}


def test_the_late_rank_its_skew_and_its_operator() -> None:
    """Rank 2 computes 300 µs longer, so it arrives last and waits least: the others'
    all-reduces last 300 µs longer (their wait)."""
    traces = [_rank(0, [500, 500], 100), _rank(1, [520, 500], 100), _rank(2, [200, 200], 400)]
    reports = [analyse_events(t["events"], t["metadata"], path=f"r{i}")
               for i, t in enumerate(traces)]  # fmt: skip
    skew = compare_ranks(reports)
    assert skew is not None
    assert (skew.collectives, skew.late_rank, skew.late_count) == (2, 2, 2)
    assert skew.skews == [(0, 320, 2), (1, 300, 2)]
    assert (skew.skew_mean_us, skew.skew_max_us) == (310, 320)
    waits = {row["rank"]: row["wait_s"] for row in skew.ranks}
    assert waits == pytest.approx({0: 600e-6, 1: 620e-6, 2: 0.0})
    assert skew.culprit == {"name": "slow_kernel", "late_us": 800, "others_median_us": 200,
                            "excess_us": 600}  # fmt: skip
    assert skew.to_json()["kind"] == "ranks"


def test_one_trace_has_no_ranks_to_compare() -> None:
    assert compare_ranks([analyse_events(_steps(1, 10))]) is None
