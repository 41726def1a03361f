"""Peer comparison on synthetic step grids with known stragglers, pauses and missing members."""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepwatch.detect.detectors._peers import (
    MAX_PENDING,
    PeerComparison,
    PeerVerdict,
    _others_median,
)

RANKS, STEPS = 8, 300
T0 = 1_780_000_000.0
NOISE = np.random.default_rng(3).normal(0.0, 0.02, (STEPS, RANKS))


def _compute(slow_rank: int | None = 3, from_step: int = 100, factor: float = 1.5) -> np.ndarray:
    """Per-step, per-rank compute time: 0.75 s with 2 % jitter, one rank slower from a step."""
    values = 0.75 * (1.0 + NOISE)
    if slow_rank is not None:
        values[from_step:, slow_rank] *= factor
    return values


def _flat(values: np.ndarray, keep: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """A grid as the column batch a store query returns: in data-time order, a row a sample."""
    steps, ranks = values.shape
    step = np.repeat(np.arange(steps), ranks)
    member = np.tile(np.arange(ranks), steps)
    ts = T0 + step.astype(np.float64)
    mask = np.ones(step.size, bool) if keep is None else keep.ravel()
    return ts[mask], step[mask], member[mask], values.ravel()[mask]


def _flagged(verdict: PeerVerdict) -> list[tuple[int, int]]:
    return sorted(
        zip(
            verdict.step[verdict.anomalous].tolist(),
            verdict.member[verdict.anomalous].tolist(),
            strict=True,
        )
    )


def _concat(parts: list[PeerVerdict]) -> PeerVerdict:
    return PeerVerdict(
        **{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(PeerVerdict)}
    )


def _same(a: PeerVerdict, b: PeerVerdict) -> None:
    for f in fields(PeerVerdict):
        np.testing.assert_array_equal(getattr(a, f.name), getattr(b, f.name), err_msg=f.name)


def test_straggler_is_flagged_after_min_steps_and_only_that_rank() -> None:
    verdict = PeerComparison(min_steps=10).update(*_flat(_compute()))
    flagged = _flagged(verdict)
    assert {member for _, member in flagged} == {3}
    assert flagged[0] == (109, 3)  # the tenth consecutive slow step
    assert [step for step, _ in flagged] == list(range(109, STEPS - 1))  # the last step waits
    slow = (verdict.member == 3) & (verdict.step >= 100)
    np.testing.assert_allclose(verdict.ratio[slow], 1.5, rtol=0.1)


@pytest.mark.parametrize(
    ("case", "edit"),
    [
        (
            "evaluation pause: all ranks x40 for 3 steps",
            lambda v: v.__setitem__(slice(200, 203), v[200:203] * 40),
        ),
        ("one slow step", lambda v: v.__setitem__((150, 5), v[150, 5] * 3)),
        (
            "slow for fewer than min_steps",
            lambda v: v.__setitem__((slice(150, 159), 5), v[150:159, 5] * 2),
        ),
        ("every rank slower from a step", lambda v: v.__setitem__(slice(100, None), v[100:] * 1.5)),
        ("no change", lambda v: None),
    ],
)
def test_normal_events_never_flag(case: str, edit: object) -> None:
    values = _compute(slow_rank=None)
    edit(values)  # type: ignore[operator]
    verdict = PeerComparison().update(*_flat(values))
    assert _flagged(verdict) == [], case
    assert verdict.ratio.size == (STEPS - 1) * RANKS


def test_one_slow_step_scores_but_does_not_flag() -> None:
    values = _compute(slow_rank=None)
    values[150, 5] *= 3
    verdict = PeerComparison().update(*_flat(values))
    at = (verdict.step == 150) & (verdict.member == 5)
    assert verdict.ratio[at][0] == pytest.approx(3.0, rel=0.1)
    assert verdict.streak[at].tolist() == [1] and not verdict.anomalous.any()


def test_compute_time_blames_the_slow_rank_not_the_ranks_waiting_on_it() -> None:
    compute = _compute(slow_rank=3, from_step=100, factor=1.5)
    allreduce = 0.1 * (1.0 + np.abs(NOISE[::-1]))
    comm = compute.max(axis=1, keepdims=True) - compute + allreduce  # peers wait for the slowest
    assert (comm[150:, [0, 1, 2, 4, 5, 6, 7]] > 1.3 * comm[50, 0]).all()
    on_compute = PeerComparison().update(*_flat(compute))
    assert {m for _, m in _flagged(on_compute)} == {3}
    on_comm = PeerComparison().update(*_flat(comm))
    assert _flagged(on_comm) == []  # the waiting ranks all rise together: none stands out


def test_missing_members_and_steps() -> None:
    keep = np.ones((STEPS, RANKS), bool)
    keep[120:140, 5] = False  # rank 5 silent for 20 steps
    keep[130:135, 3] = False  # the straggler misses 5 steps: its run is neither counted nor broken
    keep[:50, 7] = False  # rank 7 joins late
    keep[60, 2:] = False  # only two ranks report step 60: too few to judge
    verdict = PeerComparison(min_steps=10).update(*_flat(_compute(), keep))
    assert {m for _, m in _flagged(verdict)} == {3}
    assert _flagged(verdict)[0] == (109, 3)
    straggler = verdict.member == 3
    assert not np.isin(verdict.step[straggler], range(130, 135)).any()
    assert np.diff(verdict.streak[straggler & (verdict.step >= 100)]).min() == 1
    assert np.isnan(verdict.ratio[verdict.step == 60]).all()
    assert np.flatnonzero(verdict.step == 60).size == 2
    decided = np.unique(verdict.step)
    np.testing.assert_array_equal(decided, np.arange(STEPS - 1))


def test_members_whose_clocks_differ_by_two_seconds_are_all_judged() -> None:
    values = _compute()
    ts = np.arange(STEPS, dtype=np.float64)[:, None] + np.where(np.arange(RANKS) < 4, -1.0, 1.0)
    ts, step, member, value = (
        np.broadcast_to(ts, values.shape).ravel(),
        np.repeat(np.arange(STEPS), RANKS),
        np.tile(np.arange(RANKS), STEPS),
        values.ravel(),
    )
    order = np.argsort(ts, kind="stable")  # half the ranks' step k after the others' step k+1
    detector = PeerComparison(min_steps=10)
    verdict = detector.update(ts[order], step[order], member[order], value[order])
    assert detector.late_samples == 4  # step 0 of the ranks behind: decided before they began
    judged = verdict.step >= 1
    assert np.isfinite(verdict.ratio[judged]).all() and judged.sum() == (STEPS - 2) * RANKS
    assert _flagged(verdict)[0] == (109, 3)


def test_a_flagged_member_stays_flagged_through_one_quick_step() -> None:
    values = _compute()
    values[150, 3] = values[150, 2]  # the straggler has one step at its peers' pace
    verdict = PeerComparison(min_steps=10).update(*_flat(values))
    straggler = (verdict.member == 3) & (verdict.step >= 109)
    assert verdict.anomalous[straggler].all()
    assert verdict.streak[(verdict.member == 3) & (verdict.step == 150)].tolist() == [0]


def test_one_quick_step_in_ten_does_not_restart_the_count() -> None:
    values = _compute()
    values[104, 3] = values[104, 2]  # one step of the straggler at its peers' pace
    assert _flagged(PeerComparison(min_steps=10).update(*_flat(values)))[0] == (110, 3)
    values[106, 3] = values[106, 2]  # two in eleven: flagged once one is left of its last 11
    assert _flagged(PeerComparison(min_steps=10).update(*_flat(values)))[0] == (115, 3)


def test_non_finite_values_are_reported_but_not_judged() -> None:
    values = _compute()
    values[105, 3], values[106, 0] = np.nan, np.inf
    verdict = PeerComparison(min_steps=10).update(*_flat(values))
    straggler = (verdict.member == 3) & (verdict.step >= 100)
    at = verdict.step[straggler] == 105
    assert np.isnan(verdict.ratio[straggler][at]).all() and verdict.streak[straggler][
        at
    ].tolist() == [5]
    assert _flagged(verdict)[0] == (
        110,
        3,
    )  # one step later: the NaN step neither counts nor breaks
    assert np.isfinite(verdict.ratio[(verdict.step == 106) & (verdict.member != 0)]).all()


def test_a_sample_after_its_step_was_decided_is_late() -> None:
    ts, step, member, value = _flat(_compute(slow_rank=None)[:3])
    order = np.r_[0:7, 8:16, 7, 16:24]  # rank 7's step 0 arrives after step 1 from everyone
    detector = PeerComparison()
    verdict = detector.update(ts[np.sort(order)], step[order], member[order], value[order])
    assert detector.late_samples == 1
    assert not ((verdict.step == 0) & (verdict.member == 7)).any()


def test_when_most_members_fall_silent_the_waiting_steps_stay_bounded() -> None:
    keep = np.ones((STEPS, RANKS), bool)
    keep[100:, 1:] = False  # only rank 0 reports after step 99: no majority ever moves on
    detector = PeerComparison()
    verdict = detector.update(*_flat(_compute(slow_rank=None), keep))
    assert len(detector.state_dict()["pending_keys"]) == MAX_PENDING
    lone = verdict.step >= 100
    assert lone.sum() == STEPS - 100 - MAX_PENDING and np.isnan(verdict.ratio[lone]).all()


def test_leave_one_out_median_matches_brute_force() -> None:
    rng = np.random.default_rng(5)
    vals = rng.exponential(1.0, (200, 7))
    vals[rng.random(vals.shape) < 0.3] = np.nan
    got = _others_median(vals)
    for i, row in enumerate(vals):
        for j, v in enumerate(row):
            others = np.delete(row, j)
            others = others[np.isfinite(others)]
            expect = np.median(others) if np.isfinite(v) and others.size else np.nan
            np.testing.assert_equal(got[i, j], expect)


def test_known_ratios_of_three_members() -> None:
    verdict = PeerComparison(min_steps=1).update(
        T0 + np.array([0.0, 0, 0, 1]), [0, 0, 0, 1], [0, 1, 2, 0], [1.0, 1.0, 2.0, 1.0]
    )
    np.testing.assert_allclose(verdict.peer_median, [1.5, 1.5, 1.0])
    np.testing.assert_allclose(verdict.ratio, [1 / 1.5, 1 / 1.5, 2.0])
    assert verdict.anomalous.tolist() == [False, False, True]


def test_direction_down_flags_a_slow_throughput() -> None:
    throughput = 1.0 / _compute()
    assert {
        m for _, m in _flagged(PeerComparison(direction="down").update(*_flat(throughput)))
    } == {3}
    assert _flagged(PeerComparison(direction="up").update(*_flat(throughput))) == []


def test_samples_without_steps_are_compared_in_time_buckets() -> None:
    rng = np.random.default_rng(9)
    nodes, period = 4, 5.0
    phase = rng.uniform(0, period, nodes)
    ts = np.concatenate([phase[n] + period * np.arange(400) for n in range(nodes)])
    member = np.repeat(np.arange(nodes), 400)
    value = np.where((member == 2) & (ts > 1000.0), 3.0, 1.0) * (1 + rng.normal(0, 0.05, ts.size))
    order = np.argsort(ts, kind="stable")
    verdict = PeerComparison(bucket_s=10.0).update(
        T0 + ts[order], None, member[order], value[order]
    )
    flagged = verdict.anomalous
    assert set(verdict.member[flagged].tolist()) == {2}
    assert (verdict.step == -1).all()
    assert T0 + 1000 < verdict.ts[flagged].min() < T0 + 1000 + 11 * 10.0


def _stream() -> tuple[np.ndarray, ...]:
    keep = np.random.default_rng(11).random((STEPS, RANKS)) > 0.03
    keep[:40, 6] = False
    values = _compute()
    values[[70, 71], :] = np.nan
    values[200:203] *= 40
    return _flat(values, keep)


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(0, 2300), max_size=6))
def test_any_split_into_batches_gives_the_same_output(cuts: list[int]) -> None:
    columns = _stream()
    whole = PeerComparison().update(*columns)
    bounds = [0, *sorted(cuts), columns[0].size]
    detector = PeerComparison()
    parts = [
        detector.update(*(c[a:b] for c in columns))
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    _same(_concat(parts), whole)


@pytest.mark.parametrize("at", [0, 1, 805, 806, 1500])
def test_state_dict_round_trip_mid_stream(at: int) -> None:
    columns = _stream()
    first = PeerComparison()
    first.update(*(c[:at] for c in columns))
    saved = json.loads(json.dumps(first.state_dict()))
    expected = first.update(*(c[at:] for c in columns))
    resumed = PeerComparison()
    resumed.load_state_dict(saved)
    _same(resumed.update(*(c[at:] for c in columns)), expected)
    assert resumed.state_dict() == first.state_dict()


def test_load_state_dict_rejects_foreign_state() -> None:
    with pytest.raises(ValueError, match="state keys"):
        PeerComparison().load_state_dict({"last_ts": 0.0})


@pytest.mark.parametrize(
    ("columns", "match"),
    [
        (([0.0, 1.0], [0, 1], [0, 1], [1.0]), "shapes"),
        (([0.0, 1.0], [0], [0, 1], [1.0, 1.0]), "shapes"),
        (([0.0, 1.0], [0, 1], [0.0, 1.0], [1.0, 1.0]), "member must be integers"),
        (([0.0, 1.0], [0.5, 1.0], [0, 1], [1.0, 1.0]), "step must be integers"),
        (([0.0, 1.0], [0, 1], [-1, 1], [1.0, 1.0]), "small indexes"),
        (([1.0, 0.0], [0, 1], [0, 1], [1.0, 1.0]), "non-decreasing"),
        (([0.0, 1.0], [0, -1], [0, 1], [1.0, 1.0]), "steps or without"),
    ],
)
def test_bad_input_is_a_clear_value_error(columns: tuple[list[float], ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PeerComparison().update(*columns)


def test_a_detector_keeps_to_one_kind_of_grouping() -> None:
    detector = PeerComparison()
    detector.update([0.0], [0], [0], [1.0])
    with pytest.raises(ValueError, match="steps or without"):
        detector.update([1.0], None, [0], [1.0])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ratio": 1.0},
        {"min_steps": 0},
        {"min_members": 1},
        {"bucket_s": 0.0},
        {"direction": "sideways"},
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PeerComparison(**kwargs)  # type: ignore[arg-type]


def test_an_orderly_batch_is_judged_as_the_step_by_step_stream_is() -> None:
    columns = _flat(_compute())  # every rank reports every step, in step order
    whole = PeerComparison().update(*columns)  # many complete steps at once
    detector = PeerComparison()
    step = columns[1]
    parts = [detector.update(*(c[step == s] for c in columns)) for s in np.unique(step)]
    _same(_concat(parts), whole)
    assert _flagged(whole)[0] == (109, 3)
