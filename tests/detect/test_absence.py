"""Absence on synthetic heartbeat streams: a node that stops among others, a run that stops."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepwatch.detect._absence import Absence, AbsenceFinding

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
            {"last_ts": 0.0, "heard_since": 0.0, "last_seen": [1.0], "down": []}
        )


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


def test_bad_timeout_is_rejected() -> None:
    with pytest.raises(ValueError):
        Absence(timeout_s=0.0)
