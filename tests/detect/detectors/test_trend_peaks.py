"""The peaks a trend fits to: one per stretch of data time, whole stretches only, the same
however the stream is cut; and the line through them, which pauses and glitches do not tilt."""

from __future__ import annotations

import numpy as np
import pytest
from _heat import heat_wander
from hypothesis import given, settings
from hypothesis import strategies as st

from stepwatch.detect import TrendSlope, builtin_rules
from stepwatch.detect.detectors._trend_peaks import Peaks, peaks

NONE = np.full(4, np.nan)


def _all(ts: np.ndarray, value: np.ndarray, cuts: list[int], up: bool = True) -> Peaks:
    """The peaks of a stream fed in parts cut at ``cuts``, with known_at in whole-stream rows."""
    state, parts, bounds = NONE, [], [0, *sorted(set(cuts)), ts.size]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        found = peaks(ts[a:b], value[a:b], 60.0, up, state)
        parts.append((found.ts, found.value, found.known_at + a))
        state = found.still_open
    return Peaks(*(np.concatenate(c) for c in zip(*parts, strict=True)), state)


def test_each_whole_stretch_gives_its_highest_or_lowest_sample_once_the_next_begins() -> None:
    ts = np.array([30.0, 50.0, 60.0, 70.0, 110.0, 125.0, 130.0, 185.0])
    value = np.array([9.0, 8.0, 1.0, 3.0, 3.0, 5.0, 2.0, 7.0])
    high = _all(ts, value, [])
    assert high.ts.tolist() == [110.0, 125.0]  # [0, 60) began before the data: not whole
    assert high.value.tolist() == [3.0, 5.0] and high.known_at.tolist() == [5, 7]
    assert high.still_open.tolist() == [3.0, 7.0, 185.0, 1.0]  # ties go to the last
    low = _all(ts, value, [], up=False)
    assert low.value.tolist() == [1.0, 2.0] and low.ts.tolist() == [60.0, 130.0]


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(0, 200), max_size=6), seed=st.integers(0, 9))
def test_any_cut_of_the_stream_gives_the_same_peaks(cuts: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.uniform(1.0, 40.0, 200))
    value = np.round(rng.normal(0.0, 1.0, 200), 1)  # ties too
    whole, parts = _all(ts, value, []), _all(ts, value, cuts)
    for field in ("ts", "value", "known_at", "still_open"):
        np.testing.assert_array_equal(getattr(parts, field), getattr(whole, field))


def _forecast(pause_s: float = 0.0, level_jumps: bool = False) -> TrendSlope:
    return TrendSlope(
        halflife_s=600.0, target=85.0, horizon_s=1800.0, warmup_s=600.0, peak_s=60.0,
        pause_s=pause_s, level_jumps=level_jumps,
    )  # fmt: skip


TS = 5.0 * np.arange(1440)  # two hours, a reading every 5 s
NOISE = np.random.default_rng(3).normal(0.0, 0.5, TS.size)


def test_a_pause_that_cools_for_minutes_is_left_out_when_told_so() -> None:
    cooled = ((TS % 900.0) >= 600.0) & ((TS % 900.0) < 750.0)  # 150 s at 15 °C less
    temp = 75.0 + NOISE - 15.0 * cooled
    flat = _forecast(pause_s=300.0).update(TS, temp)
    assert not flat.anomalous.any()
    assert np.nanmax(np.abs(flat.slope_per_h[TS >= 900.0])) < 2.0
    tilted = _forecast().update(TS, temp)  # without: the recovery reads as a climb
    assert np.nanmax(tilted.slope_per_h[TS >= 900.0]) > 5.0


def test_a_lone_high_is_left_out_and_a_lasting_climb_is_not() -> None:
    glitch = 75.0 + NOISE + 20.0 * ((TS >= 3000.0) & (TS < 3010.0))
    assert not _forecast().update(TS, glitch).anomalous.any()
    climb = 75.0 + NOISE + 30.0 * np.clip(TS - 3000.0, 0.0, None) / 3600.0
    verdict = _forecast().update(TS, climb)
    first = TS[np.flatnonzero(verdict.anomalous)[0]]
    assert 3000.0 < first < 3000.0 + 20 * 60  # 85 °C is 20 minutes in
    assert verdict.predicted_ts[TS == first][0] == pytest.approx(
        first + verdict.time_to_target_s[TS == first][0]
    )


def test_the_peak_state_round_trips_and_only_a_peak_line_has_it() -> None:
    first = _forecast(pause_s=300.0)
    first.update(TS[:700], 75.0 + NOISE[:700])
    resumed = _forecast(pause_s=300.0)
    resumed.load_state_dict(first.state_dict())
    np.testing.assert_array_equal(
        resumed.update(TS[700:], 75.0 + NOISE[700:]).level,
        first.update(TS[700:], 75.0 + NOISE[700:]).level,
    )
    assert set(TrendSlope().state_dict()) == {"sums", "t_prev", "t_warm", "last_ts"}


def test_a_jump_starts_the_line_again_at_its_level_when_told_so() -> None:
    jump = np.where(TS < 3600.0, 66.0, 76.0) + NOISE  # a level that jumps by 10 °C at once
    assert _forecast().update(TS, jump).anomalous.any()  # the jump tilts a plain line
    judged = _forecast(level_jumps=True).update(TS, jump)
    assert not judged.anomalous.any()
    assert np.nanmax(np.abs(judged.slope_per_h[TS > 3900.0])) < 5.0  # flat at the new level
    climb = 75.0 + NOISE + 30.0 * np.clip(TS - 3000.0, 0.0, None) / 3600.0
    first = TS[np.flatnonzero(_forecast(level_jumps=True).update(TS, climb).anomalous)[0]]
    assert 3000.0 < first < 3000.0 + 20 * 60  # a climb is still one


def _whole_degrees(seed: int) -> np.ndarray:
    """A GPU's temperature as NVML reports it, in whole degrees: 70 °C and steady for its
    first 10 minutes, then wandering as heat does (each reading keeps 0.9 of the last one's
    wander), cooled 15 °C by an evaluation of 90 s every 10 minutes."""
    temp = (
        70.0
        + np.where(TS < 600.0, 0.0, heat_wander(TS.size, seed))
        - 15.0 * ((TS % 600.0) >= 510.0)
    )
    return np.round(temp)


def _thermal() -> TrendSlope:
    """The built-in forecast_thermal's line."""
    rule = next(r for r in builtin_rules().rules if r.alert == "forecast_thermal")
    return TrendSlope(**dict(rule.params))


@pytest.mark.parametrize("seed", range(6))
def test_readings_in_whole_degrees_leave_the_line_a_deviation_of_their_rounding(
    seed: int,
) -> None:
    # steady whole degrees first make the peaks' deviation about the line nothing; every
    # degree after would then be far off it, each rise a jump starting the line flat again,
    # and a climb a staircase never foretold
    temp = _whole_degrees(seed)
    climb = temp + np.round(30.0 * np.clip(TS - 3000.0, 0.0, None) / 3600.0)
    told = np.flatnonzero(_thermal().update(TS, climb).anomalous)
    assert told.size and TS[told[0]] < 3000.0 + 30 * 60  # 85 °C is 30 minutes in
    assert not _thermal().update(TS, temp).anomalous.any()


@pytest.mark.parametrize(
    "make",
    [
        lambda: TrendSlope(peak_s=0.0),
        lambda: TrendSlope(peak_s=60.0, direction="both"),
        lambda: TrendSlope(pause_s=60.0),
        lambda: TrendSlope(peak_s=60.0, pause_s=-1.0),
        lambda: TrendSlope(level_jumps=True),
    ],
)
def test_bad_peak_parameters_are_rejected(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]
