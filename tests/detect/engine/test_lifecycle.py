"""Alert lifecycle: for, keep_firing_for, pending that never fires, split-batch invariance."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from stepwatch.detect.engine._lifecycle import AlertState, Lifecycle, Transition

P, F, R = AlertState.PENDING, AlertState.FIRING, AlertState.RESOLVED


def _feed(life: Lifecycle, conditions: list[int], start: float = 0.0) -> list[tuple[str, float]]:
    ts = start + np.arange(len(conditions), dtype=np.float64)
    active = np.array(conditions, dtype=bool)
    return [(t.state, t.ts) for t in life.update(ts, active, ts * 10)]


CASES = [
    # (for_s, keep_firing_for_s, conditions one per second, expected transitions)
    (0, 0, [0, 1, 1, 0], [(P, 1.0), (F, 1.0), (R, 3.0)]),
    (2, 0, [0, 1, 1, 1, 1, 0], [(P, 1.0), (F, 3.0), (R, 5.0)]),
    (2, 0, [1, 1, 0, 1, 0], [(P, 0.0), (P, 3.0)]),  # never held 2 s: never fired
    (0, 3, [1, 0, 0, 1, 0, 0, 0, 0], [(P, 0.0), (F, 0.0), (R, 6.0)]),  # the lapse bridged
    (0, 1, [1, 0, 0, 0], [(P, 0.0), (F, 0.0), (R, 1.0)]),
    (0, 0, [1, 0, 1], [(P, 0.0), (F, 0.0), (R, 1.0), (P, 2.0), (F, 2.0)]),
    (0, 0, [], []),
]  # fmt: skip


@pytest.mark.parametrize(("for_s", "keep", "conditions", "expected"), CASES)
def test_transitions(
    for_s: float, keep: float, conditions: list[int], expected: list[tuple[str, float]]
) -> None:
    assert _feed(Lifecycle(for_s, keep), conditions) == expected


def test_a_firing_alert_reports_since_and_its_value() -> None:
    life = Lifecycle(for_s=2)
    ts = np.arange(5.0)
    out = life.update(ts, np.array([0, 1, 1, 1, 1], bool), np.array([0, 7, 8, 9, 10.0]))
    assert out == [Transition(P, 1.0, 1.0, 7.0), Transition(F, 3.0, 1.0, 9.0)]


SAMPLE_CASES = [
    # (for_samples, conditions one per second, expected transitions)
    (3, [1, 1, 0, 1, 1, 1, 0], [(P, 0.0), (P, 3.0), (F, 5.0), (R, 6.0)]),
    (1, [0, 1, 0], [(P, 1.0), (F, 1.0), (R, 2.0)]),
    (4, [1, 1, 1], [(P, 0.0)]),
]  # fmt: skip


@pytest.mark.parametrize(("for_samples", "conditions", "expected"), SAMPLE_CASES)
def test_for_samples_counts_consecutive_samples(
    for_samples: int, conditions: list[int], expected: list[tuple[str, float]]
) -> None:
    assert _feed(Lifecycle(for_samples=for_samples), conditions) == expected


HOLD_CASES = [
    # (for_s, for_samples, sample times, expected transitions): whichever comes first
    (1.0, 3, [0.0, 0.1, 0.2, 0.3, 1.5], [(P, 0.0), (F, 0.2)]),  # 3 samples before 1 s
    (1.0, 5, [0.0, 0.6, 1.2, 1.8], [(P, 0.0), (F, 1.2)]),  # 1 s before 5 samples
    (10.0, 0, [0.0, 0.1, 0.2, 10.0], [(P, 0.0), (F, 10.0)]),  # a duration alone
    (0.0, 3, [0.0, 5.0, 99.0], [(P, 0.0), (F, 99.0)]),  # a count alone
]  # fmt: skip


@pytest.mark.parametrize(("for_s", "count", "times", "expected"), HOLD_CASES)
def test_a_duration_and_a_count_fire_on_whichever_comes_first(
    for_s: float, count: int, times: list[float], expected: list[tuple[str, float]]
) -> None:
    life = Lifecycle(for_s=for_s, for_samples=count)
    ts = np.array(times)
    out = life.update(ts, np.ones(ts.size, bool), ts)
    assert [(t.state, t.ts) for t in out] == expected


def test_a_lapse_restarts_both_the_clock_and_the_count() -> None:
    life = Lifecycle(for_s=10.0, for_samples=3)
    ts = np.arange(6.0)
    out = life.update(ts, np.array([1, 1, 0, 1, 1, 1], bool), ts)
    assert [(t.state, t.ts) for t in out] == [(P, 0.0), (P, 3.0), (F, 5.0)]


@given(
    st.lists(st.booleans(), min_size=1, max_size=60),
    st.lists(st.integers(1, 60), max_size=5),
    st.sampled_from([0.0, 2.0, 5.0]),
    st.sampled_from([0.0, 1.0, 4.0]),
    st.sampled_from([0, 3]),
)
@example([True] * 8, [2, 5], 5.0, 0.0, 3)
def test_any_split_into_batches_gives_the_same_transitions(
    conditions: list[bool], cuts: list[int], for_s: float, keep: float, count: int
) -> None:
    whole = _feed(Lifecycle(for_s, keep, count), [int(c) for c in conditions])
    life, got, at = Lifecycle(for_s, keep, count), [], 0
    for cut in sorted({c for c in cuts if c < len(conditions)}) + [len(conditions)]:
        got += _feed(life, [int(c) for c in conditions[at:cut]], start=float(at))
        saved = life.state_dict()
        life = Lifecycle(for_s, keep, count)
        life.load_state_dict(saved)  # a restore mid-stream changes nothing
        at = cut
    assert got == whole


def test_a_transition_carries_the_forecast_of_the_sample_that_made_it() -> None:
    life = Lifecycle(for_s=2)
    ts = np.arange(6.0)
    active = np.array([0, 1, 1, 1, 0, 0], bool)
    predicted = np.array([np.nan, 100.0, 101.0, 102.0, np.inf, np.nan])
    out = life.update(ts, active, ts, None, predicted)
    assert [(t.state, t.predicted_ts) for t in out] == [(P, 100.0), (F, 102.0), (R, 102.0)]
    restored = Lifecycle(for_s=2)
    restored.load_state_dict(life.state_dict())
    assert restored.predicted == 102.0
    never = Lifecycle().update(ts[:1], np.ones(1, bool), ts[:1], None, np.array([np.inf]))
    assert [t.predicted_ts for t in never] == [None, None]  # a target never reached: none
