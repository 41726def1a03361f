"""Absence on synthetic heartbeat streams: a node that stops among others, a run that stops,
and the same on telemetry as it arrives (skewed clocks, lost and duplicated samples, a
sampling interval that changes); which producer of a node sent a series."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepwatch.detect.detectors._absence import Absence, AbsenceFinding, producer
from stepwatch.model import SeriesKey

NODES, PERIOD, END = 4, 5.0, 900.0
T0 = 1_780_000_000.0
Keep = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _beats(keep: Keep) -> tuple[np.ndarray, np.ndarray]:
    """Every node's heartbeat every 5 s, with a phase per node, minus what ``keep`` drops."""
    phase = np.array([0.0, 1.2, 2.5, 3.7])
    t = np.arange(0.0, END, PERIOD)
    ts = (phase[:, None] + t[None, :]).ravel()
    member = np.repeat(np.arange(NODES), t.size)
    mask = keep(ts, member)
    order = np.argsort(ts[mask], kind="stable")
    return T0 + ts[mask][order], member[mask][order]


@dataclass
class Case:
    """A heartbeat pattern and the findings it must give, as (member, kind, since, at) offsets."""

    name: str
    keep: Keep
    expected: list[tuple[int, str, float, float]]


CASES = [
    Case("all healthy", lambda ts, m: ts >= 0, []),
    Case(
        "node 2 stops, others carry on",
        lambda ts, m: ~((m == 2) & (ts > 300)),
        [(2, "down", 297.5, 358.7)],  # the first beat heard more than 60 s after its last
    ),
    Case(
        "node 2 silent for two minutes, then back",
        lambda ts, m: ~((m == 2) & (ts > 300) & (ts < 420)),
        [(2, "down", 297.5, 358.7), (2, "recovered", 297.5, 422.5)],
    ),
    Case(
        "node 2 silent for 50 s: not down", lambda ts, m: ~((m == 2) & (ts > 300) & (ts < 350)), []
    ),
    Case("the whole run stops", lambda ts, m: ts <= 300, []),
    Case(
        "the whole run pauses for 2 minutes and resumes within a minute",
        lambda ts, m: (ts < 300) | (ts > 420 + 10 * m),
        [],
    ),
    Case(
        "the run pauses; node 3 never comes back",
        lambda ts, m: (ts < 300) | ((ts > 420) & (m != 3)),
        [
            (3, "down", 298.7, 482.5)
        ],  # the first beat more than 60 s after the others resumed (421.2)
    ),
    Case("node 1 never reports: nothing to lose", lambda ts, m: m != 1, []),
]


def _offsets(findings: list[AbsenceFinding]) -> list[tuple[int, str, float, float]]:
    return [
        (f.member, f.kind, round(f.silent_since - T0, 3), round(f.detected_at - T0, 3))
        for f in findings
    ]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_table(case: Case) -> None:
    assert _offsets(Absence(timeout_s=60.0).update(*_beats(case.keep))) == case.expected


def test_down_members_are_listed_until_they_recover() -> None:
    ts, member = _beats(lambda t, m: ~((m == 2) & (t > 300) & (t < 600)))
    detector = Absence()
    detector.update(ts[ts < T0 + 500], member[ts < T0 + 500])
    assert detector.down == [2]
    detector.update(ts[ts >= T0 + 500], member[ts >= T0 + 500])
    assert detector.down == []


def _stream() -> tuple[np.ndarray, np.ndarray]:
    return _beats(
        lambda ts, m: (
            ~((m == 2) & (ts > 300) & (ts < 500))
            & ~((ts > 600) & (ts < 700))
            & ~((m == 0) & (ts > 800))
        )
    )


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(0, 720), max_size=6))
def test_any_split_into_batches_gives_the_same_findings(cuts: list[int]) -> None:
    ts, member = _stream()
    whole = Absence().update(ts, member)
    assert len(whole) == 3
    detector = Absence()
    bounds = [0, *sorted(cuts), ts.size]
    parts = [
        detector.update(ts[a:b], member[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    assert [f for part in parts for f in part] == whole


@pytest.mark.parametrize("at", [0, 1, 250, 300, 500])
def test_state_dict_round_trip_mid_stream(at: int) -> None:
    ts, member = _stream()
    first = Absence()
    first.update(ts[:at], member[:at])
    saved = json.loads(json.dumps(first.state_dict()))
    expected = first.update(ts[at:], member[at:])
    resumed = Absence()
    resumed.load_state_dict(saved)
    assert resumed.update(ts[at:], member[at:]) == expected
    assert resumed.state_dict() == first.state_dict()


def test_load_state_dict_rejects_foreign_state() -> None:
    with pytest.raises(ValueError, match="state keys"):
        Absence().load_state_dict({"last_ts": 0.0})
    with pytest.raises(ValueError, match="differ in length"):
        Absence().load_state_dict(
            {
                "last_ts": 0.0,
                "heard_since": 0.0,
                "last_seen": [1.0],
                "down": [],
                "source_seen": [],
                "source_clocked": [],
                "source_member": [],
            }
        )
    with pytest.raises(ValueError, match="sources differs in length"):
        state = {**Absence().state_dict(), "source_seen": [1.0]}
        Absence().load_state_dict(state)


@pytest.mark.parametrize(
    ("ts", "member", "match"),
    [
        ([0.0, 1.0], [0], "shapes"),
        ([0.0, 1.0], [0.0, 1.0], "integers"),
        ([0.0, 1.0], [0, -2], "small indexes"),
        ([1.0, 0.0], [0, 1], "non-decreasing"),
        ([0.0, np.inf], [0, 1], "finite"),
    ],
)
def test_bad_input_is_a_clear_value_error(ts: list[float], member: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Absence().update(ts, member)


def test_a_bad_clocked_column_is_rejected_and_changes_nothing() -> None:
    detector = Absence()
    before = detector.state_dict()
    for clocked in ([True], [1, 0]):
        with pytest.raises(ValueError, match="one boolean a sample"):
            detector.update([0.0, 1.0], [0, 1], np.array(clocked))
    with pytest.raises(ValueError, match="one index a sample"):
        detector.update([0.0, 1.0], [0, 1], None, [0])
    with pytest.raises(ValueError, match="source must be small indexes"):
        detector.update([0.0, 1.0], [0, 1], None, [0, -1])
    assert detector.state_dict() == before


def test_bad_timeout_is_rejected() -> None:
    with pytest.raises(ValueError):
        Absence(timeout_s=0.0)


# ---- telemetry as it arrives ------------------------------------------------------------


def _node2_lost_at_300(ts: np.ndarray, m: np.ndarray) -> np.ndarray:
    return ~((m == 2) & (ts > 300))


SKEW = np.array([-1.0, 1.0, -0.4, 0.7])  # each node's clock off by up to a second


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_clocks_a_second_apart_find_the_same_silences_give_or_take_the_skew(case: Case) -> None:
    ts, member = _beats(case.keep)
    skewed = ts + SKEW[member]
    order = np.argsort(skewed, kind="stable")
    found = _offsets(Absence().update(skewed[order], member[order]))
    assert [(m, k) for m, k, _, _ in found] == [(m, k) for m, k, _, _ in case.expected]
    for (_, _, since, at), (_, _, since0, at0) in zip(found, case.expected, strict=True):
        assert abs(since - since0) <= 1.0 and abs(at - at0) <= 2.0


def _lossy(keep: Keep, seed: int) -> Keep:
    """``keep`` less 5 % of the samples at random and, on every node, one burst of 5-30 s."""
    rng = np.random.default_rng(seed)
    start = rng.uniform(0, END - 30, NODES)
    length = rng.uniform(5, 30, NODES)

    def kept(ts: np.ndarray, m: np.ndarray) -> np.ndarray:
        burst = (ts >= start[m]) & (ts < start[m] + length[m])
        return keep(ts, m) & ~burst & (rng.random(ts.shape) >= 0.05)

    return kept


@pytest.mark.parametrize("seed", range(8))
def test_lost_samples_and_burst_losses_raise_nothing_and_hide_no_lost_node(seed: int) -> None:
    assert Absence().update(*_beats(_lossy(lambda ts, m: ts >= 0, seed))) == []
    (down,) = Absence().update(*_beats(_lossy(_node2_lost_at_300, seed)))
    assert down.member == 2 and down.kind == "down"
    assert 300 - 30 - PERIOD <= down.silent_since - T0 <= 300  # a burst may end it early
    assert down.detected_at - T0 <= 300 + 60 + 2 * PERIOD


def test_duplicated_samples_change_nothing() -> None:
    ts, member = _beats(_node2_lost_at_300)
    again = np.random.default_rng(0).random(ts.shape) < 0.2  # a fifth of them sent twice
    dup_ts, dup_member = np.r_[ts, ts[again]], np.r_[member, member[again]]
    order = np.argsort(dup_ts, kind="stable")
    assert Absence().update(dup_ts[order], dup_member[order]) == Absence().update(ts, member)


def test_a_sampling_interval_that_grows_from_5_to_15_s_is_no_silence() -> None:
    ts, member = _beats(lambda t, m: t >= 0)
    phase = np.array([0.0, 1.2, 2.5, 3.7])
    keep = (ts - T0 < 450) | (np.round(ts - T0 - phase[member]) % 15 == 0)  # 15 s from 450 s
    assert Absence().update(ts[keep], member[keep]) == []
    lost = keep & ~((member == 2) & (ts - T0 > 600))
    (down,) = Absence().update(ts[lost], member[lost])
    assert down.member == 2 and 600 - 15 < down.silent_since - T0 <= 600
    assert 60 < down.detected_at - down.silent_since <= 60 + 15


# ---- training metrics: alive, never judged ------------------------------------------------


def _mixed(clock_stops: float, steps_stop: float) -> tuple[np.ndarray, ...]:
    """Members 0 and 1 beat on a clock every 5 s and step every second; member 1 stops beating
    at ``clock_stops`` and stepping at ``steps_stop``; member 2 only ever steps."""
    t = np.arange(0.0, 600.0, 1.0)
    rows = []
    for m in (0, 1, 2):
        beats = t[(t % 5 == 0) & ((m != 1) | (t < clock_stops))] if m < 2 else t[:0]
        steps = t[(m != 1) | (t < steps_stop)]
        rows += [(b, m, True) for b in beats] + [(s + 0.5, m, False) for s in steps]
    rows.sort()
    ts, member, clocked = (np.array(column) for column in zip(*rows, strict=True))
    return T0 + ts, member.astype(np.int64), clocked.astype(bool)


def test_a_member_that_keeps_stepping_is_alive_without_its_clock() -> None:
    assert Absence().update(*_mixed(clock_stops=200, steps_stop=math.inf)) == []


def test_a_member_silent_on_both_is_down() -> None:
    (down,) = Absence().update(*_mixed(clock_stops=200, steps_stop=200))
    assert (down.member, down.kind, down.silent_since - T0) == (1, "down", 199.5)


def test_a_member_that_only_steps_is_never_judged_by_its_silence() -> None:
    ts, member, clocked = _mixed(clock_stops=math.inf, steps_stop=math.inf)
    paused = ~((member == 2) & (ts - T0 > 200) & (ts - T0 < 400))  # an evaluation, say
    assert Absence().update(ts[paused], member[paused], clocked[paused]) == []


def _job(hang: float, agent_stops: float, beats: bool) -> tuple[np.ndarray, ...]:
    """Three nodes (members), each an agent (source 2m, on a clock every 5 s) and a rank
    (source 2m+1, one step a second, and with ``beats`` a heartbeat every 5 s); no step
    completes after ``hang``; node 1's agent (and its rank's heartbeat) stops at
    ``agent_stops``, its rank's steps then too."""
    t = np.arange(0.0, 900.0, 1.0)
    rows = []
    for m in range(3):
        end = agent_stops if m == 1 else math.inf
        clock = t[(t % 5 == 0) & (t < end)]
        rows += [(c, m, True, 2 * m) for c in clock]
        rows += [(c + 0.2, m, True, 2 * m + 1) for c in clock] if beats else []
        rows += [(s + 0.5, m, False, 2 * m + 1) for s in t[(t < hang) & (t < end)]]
    rows.sort()
    ts, member, clocked, source = (np.array(column) for column in zip(*rows, strict=True))
    return T0 + ts, member.astype(np.int64), clocked.astype(bool), source.astype(np.int64)


def test_a_node_lost_with_its_ranks_is_down_while_the_others_hang() -> None:
    (down,) = Absence().update(*_job(hang=400, agent_stops=400, beats=False))
    assert (down.member, down.silent_since - T0) == (1, 399.5)


def test_an_agent_silent_after_the_whole_job_hung_is_not_a_lost_node() -> None:
    assert Absence().update(*_job(hang=400, agent_stops=600, beats=False)) == []


def test_ranks_that_beat_while_hung_still_tell_a_later_loss() -> None:
    (down,) = Absence().update(*_job(hang=400, agent_stops=600, beats=True))
    assert (down.member, round(down.silent_since - T0, 3)) == (1, 595.2)


@pytest.mark.parametrize("cut", [1, 900, 1500, 2400])
def test_sources_give_the_same_findings_however_the_stream_is_cut(cut: int) -> None:
    columns = _job(hang=400, agent_stops=400, beats=False)
    whole = Absence().update(*columns)
    detector = Absence()
    first = detector.update(*(c[:cut] for c in columns))
    assert first + detector.update(*(c[cut:] for c in columns)) == whole


def test_watched_members_survive_a_state_round_trip() -> None:
    ts, member, clocked = _mixed(clock_stops=300, steps_stop=300)
    first = Absence()
    first.update(ts[:400], member[:400], clocked[:400])
    resumed = Absence()
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert resumed.update(ts[400:], member[400:], clocked[400:]) == first.update(
        ts[400:], member[400:], clocked[400:]
    )


# ---- producers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "labels", "expected"),
    [
        ("gpu.util_pct", {"node": "n1", "gpu": "3"}, "agent"),
        ("gpu.util_pct", {"node": "n1", "gpu": "3", "rank": "11"}, "agent"),  # as scenarios say
        ("host.cpu_pct", {"node": "n1"}, "agent"),
        ("stepwatch.heartbeat_s", {"node": "n1"}, "agent"),
        ("stepwatch.heartbeat_s", {"node": "n1", "rank": "11", "local_rank": "3"}, "rank11"),
        ("train.step_time_s", {"node": "n1", "rank": "11"}, "rank11"),
        ("train.loss", {"node": "n1"}, "trainer"),
    ],
)
def test_the_producer_of_a_series(name: str, labels: dict[str, str], expected: str) -> None:
    assert producer(SeriesKey.of(name, {"run": "r", **labels})) == expected
