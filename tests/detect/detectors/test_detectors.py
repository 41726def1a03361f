"""Every detector through one table of synthetic series, batch splits and state round trips."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepwatch.detect.detectors._base import Detector, Verdict, decayed_cumsum
from stepwatch.detect.detectors._detector_iqr import IqrFence
from stepwatch.detect.detectors._detector_trend import Plateau, Rise, TrendSlope
from stepwatch.detect.detectors._detectors import (
    Cusum,
    HoldFor,
    NonFinite,
    RobustZ,
    Share,
    Threshold,
)

N = 600
TS = 1_780_000_000.0 + 10.0 * np.arange(N)
NOISE = np.random.default_rng(7).standard_normal(N)


def _series(kind: str) -> np.ndarray:
    base = 2.0 + 0.02 * NOISE
    if kind == "constant":
        return np.full(N, 2.0)
    if kind == "noise":
        return base
    if kind == "step":
        return np.where(np.arange(N) >= 300, 2 * base, base)
    if kind == "spike":
        return np.where(np.arange(N) == 300, 40.0, base)
    if kind == "ramp":
        return 2.0 + (TS - TS[0]) / 3600.0
    if kind == "nonfinite":
        out = base.copy()
        out[[50, 300, 301, 450]] = [np.nan, np.inf, -np.inf, np.nan]
        return out
    raise AssertionError(kind)


DETECTORS: dict[str, Callable[[], Detector]] = {
    "nonfinite": NonFinite,
    "threshold": lambda: Threshold(3.0),
    "hold_for": lambda: HoldFor(for_s=25.0, keep_firing_for_s=15.0),
    "robust_z": RobustZ,
    "cusum": Cusum,
    "trend": lambda: TrendSlope(halflife_s=600.0, threshold_pct_per_h=20.0),
    "trend_peaks": lambda: TrendSlope(
        halflife_s=600.0, target=4.0, horizon_s=1800.0, warmup_s=600.0, peak_s=60.0, pause_s=180.0
    ),
    "plateau": lambda: Plateau(window=100),
    "rise": lambda: Rise(halflife=10.0, window=100),
    "share": lambda: Share(3.0, window_s=50.0),
    "iqr": lambda: IqrFence(window=50),
    "iqr_detrend": lambda: IqrFence(window=50, detrend=True),
}

# Known answers: the exact anomalous samples, or the first one of a lasting alarm.
FIRES: dict[tuple[str, str], list[int]] = {
    ("nonfinite", "nonfinite"): [50, 300, 301, 450],
    ("threshold", "step"): [i for i in range(300, N) if 2.0 * (2.0 + 0.02 * NOISE[i]) > 3.0],
    ("threshold", "spike"): [300],
    ("robust_z", "spike"): [300],
    ("iqr", "spike"): [300],
    ("iqr_detrend", "spike"): [300],
}
FIRST: dict[tuple[str, str], int] = {
    ("robust_z", "step"): 300,
    ("cusum", "step"): 302,
    ("trend", "ramp"): 30,  # the first sample after warm-up (half a half-life)
    ("trend", "spike"): 300,  # least squares is not robust: a rule holds it for a while
    ("rise", "spike"): 300,  # so is a smoothed level: a rule holds it for a while
    ("rise", "step"): 301,  # doubling lifts a 10-sample EWMA 10 % within two samples
    ("share", "step"): 302,  # three of the five samples in 50 s
}
QUIET = {"constant", "noise", "nonfinite", "spike"}


@pytest.mark.parametrize("series", ["constant", "noise", "step", "spike", "ramp", "nonfinite"])
@pytest.mark.parametrize("name", list(DETECTORS))
def test_table(name: str, series: str) -> None:
    values = _series(series)
    verdict = DETECTORS[name]().update(TS, values)
    assert verdict.score.shape == verdict.anomalous.shape == (N,)
    assert verdict.score.dtype == np.float64 and verdict.anomalous.dtype == np.bool_
    if name != "nonfinite":
        bad = ~np.isfinite(values)
        assert np.isnan(verdict.score[bad]).all() and not verdict.anomalous[bad].any()
    hits = np.flatnonzero(verdict.anomalous).tolist()
    if (name, series) in FIRST:
        assert hits[:1] == [FIRST[name, series]]
    elif (name, series) in FIRES:
        assert hits == FIRES[name, series]
    elif series in QUIET and name != "hold_for":
        assert hits == []


@pytest.mark.parametrize("name", list(DETECTORS))
@pytest.mark.parametrize("size", [0, 1])
def test_empty_and_single_sample(name: str, size: int) -> None:
    detector = DETECTORS[name]()
    verdict = detector.update(TS[:size], np.full(size, 2.0))
    assert verdict.score.shape == verdict.anomalous.shape == (size,)
    again = detector.update(TS[size : size + 3], np.full(3, 2.0))
    assert again.score.shape == (3,)


def _alike(a: Verdict, b: Verdict) -> None:
    """Equal verdicts, up to float rounding of the closed-form recursions."""
    for field in fields(a):
        left, right = getattr(a, field.name), getattr(b, field.name)
        if left.dtype == np.bool_:
            np.testing.assert_array_equal(left, right)
        else:
            np.testing.assert_allclose(left, right, rtol=1e-6, atol=1e-9)


def _concat(parts: list[Verdict]) -> Verdict:
    kind = type(parts[0])
    return kind(
        **{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(kind)}
    )


def _batches(detector: Detector, values: np.ndarray, cuts: list[int]) -> Verdict:
    bounds = [0, *sorted(cuts), N]
    return _concat(
        [detector.update(TS[a:b], values[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    )


@settings(max_examples=15, deadline=None)
@given(
    name=st.sampled_from(list(DETECTORS)),
    series=st.sampled_from(["noise", "step", "spike", "ramp", "nonfinite"]),
    cuts=st.lists(st.integers(0, N), max_size=6),
)
def test_any_split_into_batches_gives_the_same_output(
    name: str, series: str, cuts: list[int]
) -> None:
    values = _series(series)
    whole = DETECTORS[name]().update(TS, values)
    _alike(_batches(DETECTORS[name](), values, cuts), whole)


@pytest.mark.parametrize("name", list(DETECTORS))
@pytest.mark.parametrize("at", [0, 1, 299, 451])
def test_state_dict_round_trip_mid_stream(name: str, at: int) -> None:
    values = _series("nonfinite") if name == "nonfinite" else _series("step")
    values = np.where(np.arange(N) == 450, np.nan, values)
    first = DETECTORS[name]()
    first.update(TS[:at], values[:at])
    saved = json.loads(json.dumps(first.state_dict()))
    expected = first.update(TS[at:], values[at:])
    resumed = DETECTORS[name]()
    resumed.load_state_dict(saved)
    _alike(resumed.update(TS[at:], values[at:]), expected)


@pytest.mark.parametrize("name", list(DETECTORS))
def test_state_dict_is_a_snapshot(name: str) -> None:
    detector = DETECTORS[name]()
    detector.update(TS[:100], _series("noise")[:100])
    saved = detector.state_dict()
    before = json.dumps(saved)
    detector.update(TS[100:], _series("noise")[100:])
    assert json.dumps(saved) == before


def test_load_state_dict_rejects_foreign_state() -> None:
    with pytest.raises(ValueError, match="state keys"):
        RobustZ().load_state_dict(Cusum().state_dict())
    with pytest.raises(ValueError, match="shape"):
        Plateau(window=10).load_state_dict(Plateau(window=20).state_dict())


@pytest.mark.parametrize(
    ("ts", "value", "match"),
    [
        (np.arange(3.0), np.zeros(4), "shapes"),
        (np.zeros((2, 2)), np.zeros((2, 2)), "1-D"),
        (np.array([0.0, 2.0, 1.0]), np.zeros(3), "non-decreasing"),
        (np.array([0.0, np.nan]), np.zeros(2), "finite"),
    ],
)
@pytest.mark.parametrize("name", list(DETECTORS))
def test_bad_input_is_a_clear_value_error(
    name: str, ts: np.ndarray, value: np.ndarray, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        DETECTORS[name]().update(ts, value)


def test_ts_must_not_go_back_across_batches() -> None:
    detector = Threshold(1.0)
    detector.update(np.array([5.0, 6.0]), np.zeros(2))
    with pytest.raises(ValueError, match="previous batch ended at 6.0"):
        detector.update(np.array([5.5]), np.zeros(1))
    assert detector.update(np.array([6.0]), np.zeros(1)).score.shape == (1,)


def test_decayed_cumsum_matches_the_recursion_over_long_gaps() -> None:
    rng = np.random.default_rng(1)
    f = rng.standard_normal((2, 500)) * 1e6
    log_decay = -rng.exponential(3.0, 500)
    expected, carry = np.empty_like(f), np.array([1.0, -2.0])
    for j in range(500):
        carry = np.exp(max(log_decay[j], -40.0)) * carry + f[:, j]
        expected[:, j] = carry
    got = decayed_cumsum(f, log_decay, np.array([1.0, -2.0]))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-3)


@dataclass
class Hold:
    """One HoldFor case: condition per 10 s sample and the expected firing samples."""

    cond: list[int]
    for_s: float
    keep_s: float
    firing: list[int]


@pytest.mark.parametrize(
    "case",
    [
        Hold([0, 1, 1, 1, 1, 0, 0, 0], for_s=20.0, keep_s=0.0, firing=[3, 4]),
        Hold([0, 1, 1, 1, 1, 0, 0, 0], for_s=20.0, keep_s=25.0, firing=[3, 4, 5, 6]),
        Hold([1, 1, 0, 1, 1, 0, 1, 1], for_s=10.0, keep_s=0.0, firing=[1, 4, 7]),
        Hold([1, 1, 1, 1], for_s=0.0, keep_s=0.0, firing=[0, 1, 2, 3]),
        Hold([1, 0, 1, 0], for_s=5.0, keep_s=100.0, firing=[]),
    ],
)
def test_hold_for_counts_data_time(case: Hold) -> None:
    ts = 10.0 * np.arange(len(case.cond))
    verdict = HoldFor(case.for_s, case.keep_s).update(ts, np.array(case.cond, dtype=np.float64))
    assert np.flatnonzero(verdict.anomalous).tolist() == case.firing
    cond = np.array(case.cond, bool)
    assert (verdict.score[~cond] == 0).all()
    assert (verdict.score[verdict.anomalous & cond] >= case.for_s).all()


def test_hold_for_skips_nan_without_breaking_the_hold() -> None:
    cond = np.array([1.0, np.nan, 1.0, 1.0])
    verdict = HoldFor(for_s=20.0).update(10.0 * np.arange(4), cond)
    assert verdict.anomalous.tolist() == [False, False, True, True]


def test_robust_z_direction_and_known_score() -> None:
    values = np.tile([1.0, 3.0], 100)
    values[-1] = 2.0 - 12.0 * 1.4826  # MAD of the alternating series is 1
    down = RobustZ(direction="down", halflife=1e9).update(TS[:200], values)
    up = RobustZ(direction="up", halflife=1e9).update(TS[:200], values)
    assert down.anomalous[-1] and not up.anomalous.any()
    assert down.score[-1] == pytest.approx(12.0, rel=0.05)


def test_cusum_ignores_isolated_pauses_but_not_a_lasting_shift() -> None:
    values = _series("noise")
    values[[200, 400]] = 60.0 * values[[200, 400]]  # evaluation pauses
    assert not Cusum().update(TS, values).anomalous.any()
    slower = np.where(np.arange(N) >= 500, 1.25 * values, values)
    assert np.flatnonzero(Cusum().update(TS, slower).anomalous)[0] in range(500, 520)
    faster = np.where(np.arange(N) >= 500, 0.75 * values, values)
    assert not Cusum(direction="up").update(TS, faster).anomalous.any()
    assert Cusum(direction="both").update(TS, faster).anomalous[-1]


def test_trend_slope_recovers_a_known_line_and_time_to_target() -> None:
    ts = 60.0 * np.arange(240)
    values = 100.0 + 4.0 * ts / 3600.0  # +4 per hour
    verdict = TrendSlope(halflife_s=1800.0, target=120.0).update(ts, values)
    np.testing.assert_allclose(verdict.slope_per_h[-1], 4.0, rtol=1e-6)
    np.testing.assert_allclose(verdict.level[-1], values[-1], rtol=1e-9)
    np.testing.assert_allclose(verdict.score[-1], 400.0 / values[-1], rtol=1e-6)
    np.testing.assert_allclose(verdict.time_to_target_s[-1], (120.0 - values[-1]) / 4.0 * 3600.0)
    assert (
        np.isnan(verdict.score[ts < 900.0]).all() and not np.isnan(verdict.score[ts >= 900]).any()
    )


def test_a_level_that_follows_a_steep_fall_keeps_a_spike_in_view() -> None:
    steps = np.arange(400.0)
    loss = 6.0 * (steps + 20) ** -0.3 * (1 + 0.01 * np.random.default_rng(5).normal(size=400))
    loss[300:304] *= 2.0  # a spike on a loss still falling fast
    lagging = RobustZ(z=6.0).update(steps, loss).score[300:304]
    following = RobustZ(z=6.0, level_halflife=20.0).update(steps, loss).score[300:304]
    assert (following >= 6.0).all() and (following > lagging).all()


def test_iqr_fences_are_not_widened_by_earlier_outliers() -> None:
    values = 10.0 + 0.1 * NOISE[:300]
    values[[100, 130, 160, 190]] = 50.0  # outliers inside the window of the next one
    values[220] = 12.0  # 20 standard deviations out, far beyond Q3 + 3 IQR
    verdict = IqrFence(window=200).update(TS[:300], values)
    assert np.flatnonzero(verdict.anomalous).tolist() == [100, 130, 160, 190, 220]
    q1, q3 = np.percentile(values[20:220], [25, 75])
    assert verdict.score[220] == pytest.approx((12.0 - q3) / (q3 - q1))


@dataclass
class Fall:
    """A loss with or without a spike that doubles it and fades over 20 steps; ``held`` is
    whether 3 samples in a row are beyond. ``flat`` is a late run's flat loss with a run of 6
    low samples before it returns, in place of a young run's fall."""

    seed: int
    spike_at: int | None
    detrend: bool
    held: bool
    flat: bool = False


def _loss(case: Fall) -> np.ndarray:
    steps = np.arange(300.0)
    rng = np.random.default_rng(case.seed)
    if case.flat:
        loss = 2.0 * (1 + 0.012 * rng.standard_normal(steps.size))
        loss[150:156] *= 0.975
        loss[156:160] *= 1.03
    else:  # a steep power law, noisier early
        loss = (2.0 + 8.0 * (steps + 1) ** -0.35) * (1 + 0.03 * rng.standard_normal(steps.size))
    if case.spike_at is not None:
        since = steps[case.spike_at : case.spike_at + 20] - case.spike_at
        loss[case.spike_at : case.spike_at + 20] *= 1 + np.exp(-4 * since / 20)
    return loss


@pytest.mark.parametrize(
    "case",
    [
        *(Fall(seed, at, detrend=True, held=True) for seed in (1, 2, 3) for at in (12, 20, 150)),
        *(Fall(seed, None, detrend=True, held=False) for seed in range(1, 7)),
        Fall(1, 12, detrend=False, held=False),  # the fall's own spread hides it
        Fall(2, 20, detrend=False, held=False),
        # the low run tilts the line, but a flat window is judged without it
        *(Fall(seed, None, detrend=True, held=False, flat=True) for seed in (11, 12, 13)),
        Fall(11, 200, detrend=True, held=True, flat=True),
    ],
)
def test_iqr_detrend_sees_a_spike_on_a_steep_fall(case: Fall) -> None:
    loss = _loss(case)
    detector = IqrFence(k=3.0, window=20, warmup=8, detrend=case.detrend)
    beyond = detector.update(np.arange(loss.size, dtype=np.float64), loss).anomalous
    runs = np.convolve(beyond, np.ones(3), mode="valid") == 3
    assert runs.any() == case.held
    if case.held and case.spike_at is not None:
        assert case.spike_at <= np.flatnonzero(runs)[0] <= case.spike_at + 3


def test_iqr_detrend_judges_a_flat_window_as_without() -> None:
    loss = _loss(Fall(12, None, detrend=True, held=False, flat=True))
    ts = np.arange(loss.size, dtype=np.float64)
    detrended = IqrFence(k=3.0, window=20, warmup=8, detrend=True).update(ts, loss)
    plain = IqrFence(k=3.0, window=20, warmup=8).update(ts, loss)
    np.testing.assert_array_equal(detrended.score[100:], plain.score[100:])


def test_trend_with_a_horizon_fires_when_the_target_is_due_within_it() -> None:
    ts = 60.0 * np.arange(600)  # 10 hours, a sample a minute
    free = 10e12 - 1e12 * ts / 3600.0  # 1 TB an hour less: empty after 10 h
    verdict = TrendSlope(halflife_s=1800.0, target=0.0, direction="down", horizon_s=7200.0).update(
        ts, free
    )
    first = int(np.flatnonzero(verdict.anomalous)[0])
    assert ts[first] == pytest.approx(8 * 3600.0, abs=120.0)  # two hours before it is empty
    assert verdict.anomalous[first:].all()


def _memory(ts: np.ndarray, seed: int, rate_per_h: float = 0.0) -> np.ndarray:
    """Host memory at 40 % of 1 TB with the noise of a real reading (0.2 % of the total)."""
    noise = np.random.default_rng(seed).normal(0.0, 0.002, ts.size)
    return (0.4 * (1.0 + rate_per_h) ** (ts / 3600.0) + noise) * 1e12


def _gappy(ts: np.ndarray, seed: int) -> np.ndarray:
    """The same clock with 5 % of the samples lost at random, a 60 s burst lost every half
    hour, and the interval tripled after the first two hours (5 s to 15 s)."""
    rng = np.random.default_rng(seed)
    keep = (rng.random(ts.size) >= 0.05) & (ts % 1800.0 >= 60.0)
    keep &= (ts < 7200.0) | (np.round(ts / 5.0) % 3 == 0)
    return ts[keep]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_trend_reads_the_same_slope_through_lost_samples_and_a_changed_interval(
    seed: int,
) -> None:
    ts = 5.0 * np.arange(4 * 720)  # 4 hours
    for rate in (0.0, 0.06):
        whole = TrendSlope(halflife_s=900.0).update(ts, _memory(ts, seed, rate))
        thin = _gappy(ts, seed)
        lossy = TrendSlope(halflife_s=900.0).update(thin, _memory(thin, seed, rate))
        at = thin >= 3600.0
        assert np.abs(lossy.score[at] - 100 * np.log1p(rate)).max() < 1.0  # % per hour
        assert np.abs(whole.score[ts >= 3600.0] - 100 * np.log1p(rate)).max() < 1.0


def test_a_gap_longer_than_the_warm_up_warms_up_again_visibly_and_keeps_the_past() -> None:
    detector = TrendSlope(halflife_s=900.0, warmup_s=600.0, threshold_pct_per_h=3.0)
    before = 5.0 * np.arange(720)  # an hour, then 20 minutes of nothing
    after = before[-1] + 1200.0 + 5.0 * np.arange(360)
    assert not detector.update(before, _memory(before, 4)).anomalous.any()
    assert detector.warming_up() is None
    verdict = detector.update(after[:60], _memory(after[:60], 5) * 1.02)  # 2 % more after it
    assert np.isnan(verdict.score).all() and not verdict.anomalous.any()
    warming = detector.warming_up()
    assert warming is not None and (warming.seen, warming.needed) == (295.0, 600.0)
    rest = detector.update(after[60:], _memory(after[60:], 6) * 1.02)
    judged = ~np.isnan(rest.score)
    assert judged.any() and np.isnan(rest.score[after[60:] - after[0] < 600.0]).all()
    # the hour before the gap still anchors the line: one step of 2 %, not a trend of 7 %/h
    assert not rest.anomalous.any() and rest.score[judged].max() < 3.0
    restored = TrendSlope(halflife_s=900.0, warmup_s=600.0, threshold_pct_per_h=3.0)
    restored.load_state_dict(detector.state_dict())
    assert restored.warming_up() is None and restored.t_warm == after[0]


def test_a_gap_shorter_than_the_warm_up_is_no_reset() -> None:
    detector = TrendSlope(halflife_s=900.0)  # warm-up: 450 s
    ts = np.concatenate([5.0 * np.arange(720), 3600.0 + 180.0 + 5.0 * np.arange(60)])
    verdict = detector.update(ts, _memory(ts, 7))
    assert not np.isnan(verdict.score[720:]).any() and detector.warming_up() is None


@pytest.mark.parametrize("noise", [0.005, 0.01])
@pytest.mark.parametrize("offset", [10.0, 1000.0])  # a young run, and one resumed later
def test_plateau_fires_on_a_stall_but_not_on_the_ordinary_slow_down(
    noise: float, offset: float
) -> None:
    steps = np.arange(8000.0)
    rng = np.random.default_rng(7)
    base = 2.0 + 8.0 * (steps + offset) ** -0.4
    jitter = 1 + noise * rng.standard_t(4, steps.size)  # heavy-tailed, like a training loss
    assert not Plateau().update(steps, base * jitter).anomalous.any()
    stalled = np.where(steps < 4000, base, base[4000]) * jitter
    hits = np.flatnonzero(Plateau().update(steps, stalled).anomalous)
    assert hits.size and 4000 <= hits[0] < 5000


def _held_plateau(steps: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Where Plateau has held for 100 steps, as the built-in rule holds it."""
    anomalous = Plateau().update(steps, loss).anomalous
    return np.flatnonzero(HoldFor(for_s=99.0).update(steps, anomalous.astype(float)).anomalous)


@pytest.mark.parametrize("offset", [10.0, 300.0])
def test_plateau_under_heavy_tailed_noise_is_found_and_a_slow_fall_is_not_one(
    offset: float,
) -> None:
    # Student-t(3) noise of 2 % of the loss: outliers both ways that inflate a plain
    # least-squares error, as a real loss has them
    steps = np.arange(8000.0)
    base = 2.0 + 8.0 * (steps + offset) ** -0.4
    for seed in range(10):
        jitter = 1 + 0.02 * np.random.default_rng(seed).standard_t(3, steps.size)
        assert _held_plateau(steps, base * jitter).size == 0, seed
        stalled = _held_plateau(steps, np.where(steps < 4000, base, base[4000]) * jitter)
        assert stalled.size and 4000 <= stalled[0] < 5500, seed


def test_heavy_tailed_noise_makes_no_plateau_of_a_long_run_a_spike_or_a_divergence() -> None:
    steps = np.arange(8000.0)
    jitter = 1 + 0.02 * np.random.default_rng(5).standard_t(3, steps.size)
    late = (2.0 + 8.0 * (steps + 20000) ** -0.4) * jitter  # resumed late: falling slowly
    assert _held_plateau(steps, late).size == 0
    young = (2.0 + 8.0 * (steps + 10) ** -0.4) * jitter
    spiked = young.copy()
    spiked[5000:5040] *= 3.0
    assert _held_plateau(steps, spiked).size == 0
    diverging = young * np.where(steps < 5000, 1.0, 1 + 0.0005 * (steps - 5000))
    assert _held_plateau(steps, diverging).size == 0


def test_rise_measures_the_smoothed_value_above_its_recent_best() -> None:
    steps = np.arange(3000.0)
    loss = 2.0 + 8.0 * (steps + 10) ** -0.4  # falling: never above its best
    assert not Rise().update(steps, loss).anomalous.any()
    diverging = loss.copy()
    diverging[2000:] *= 1 + 0.002 * np.arange(1000)  # +0.2 % a step from step 2000
    verdict = Rise().update(steps, diverging)
    first = int(np.flatnonzero(verdict.anomalous)[0])
    assert 2050 <= first <= 2200  # 10 % up, after the EWMA's lag of about 70 steps
    raw = diverging[-1] / loss[2000] - 1  # the smoothed value lags the last one a little
    assert 0.85 * raw < verdict.score[-1] < raw
    forgotten = np.r_[loss[:2000], np.full(2500, loss[1999] * 1.2)]  # a new level, for good
    assert not Rise(window=1000).update(np.arange(4500.0), forgotten).anomalous[-1]


def test_share_holds_through_brief_dips_but_not_through_a_mostly_cool_window() -> None:
    ts = 5.0 * np.arange(200)  # a sample every 5 s
    temp = np.full(200, 86.0)
    temp[::10] = 60.0  # an evaluation pause every 50 s cools the GPU for one sample
    verdict = Share(80.0, ">=", window_s=300.0).update(ts, temp)
    assert np.flatnonzero(verdict.anomalous)[0] == 60  # one whole window of data first
    assert verdict.anomalous[60:].all()
    assert verdict.score[-1] == pytest.approx(0.9, abs=0.02)
    mostly_cool = np.where(np.arange(200) % 10 < 6, 60.0, 86.0)
    assert not Share(80.0, ">=", window_s=300.0).update(ts, mostly_cool).anomalous.any()


def test_after_a_gap_share_waits_until_its_samples_span_share_of_the_window() -> None:
    ts = np.r_[5.0 * np.arange(100), 1000.0 + 5.0 * np.arange(60)]  # silent from 500 s to 1000 s
    temp = np.r_[np.full(100, 60.0), np.full(60, 86.0)]
    verdict = Share(80.0, ">=", window_s=300.0).update(ts, temp)
    after = np.flatnonzero(ts >= 1000.0)
    assert not verdict.anomalous[after[:30]].any()  # hot, but over less than half the window
    assert verdict.anomalous[after[30:]].all()
    hot = Share(80.0, ">=", window_s=300.0)
    hot.update(ts, np.full(ts.size, 86.0))
    cool_after_gap = hot.update(np.array([1800.0, 1805.0]), np.array([60.0, 60.0]))
    assert cool_after_gap.anomalous.all()  # a gap does not resolve it either: its decision stands


def test_a_spike_is_not_a_plateau() -> None:
    steps = np.arange(6000.0)
    loss = (2.0 + 8.0 * (steps + 10) ** -0.4) * (
        1 + 0.015 * np.random.default_rng(3).normal(size=steps.size)
    )
    loss[5000:5040] *= 3.0  # a spike at the end of the recent window lifts its line
    assert not Plateau().update(steps, loss).anomalous.any()


def test_cusum_skips_non_positive_values() -> None:
    values = _series("noise")
    values[[100, 200]] = [0.0, -3.0]
    verdict = Cusum().update(TS, values)
    assert np.isnan(verdict.score[[100, 200]]).all()
    kept = dataclasses.replace(
        verdict,
        **{f.name: np.delete(getattr(verdict, f.name), [100, 200]) for f in fields(verdict)},
    )
    _alike(Cusum().update(np.delete(TS, [100, 200]), np.delete(values, [100, 200])), kept)


@pytest.mark.parametrize(
    "make",
    [
        lambda: RobustZ(direction="sideways"),  # type: ignore[arg-type]
        lambda: RobustZ(z=0.0),
        lambda: Cusum(shift=0.0),
        lambda: Threshold(1.0, op="=="),
        lambda: HoldFor(for_s=-1.0),
        lambda: TrendSlope(halflife_s=0.0),
        lambda: Plateau(ratio=1.5),
        lambda: Plateau(history=0),
        lambda: Rise(rise=0.0),
        lambda: Share(1.0, window_s=0.0),
        lambda: IqrFence(k=0.0),
        lambda: IqrFence(window=10, warmup=20),
        lambda: IqrFence(window=3, detrend=True),
        lambda: TrendSlope(horizon_s=60.0),
        lambda: RobustZ(level_halflife=0.0),
        lambda: Share(1.0, share=1.5),
    ],
)
def test_bad_parameters_are_rejected(make: Callable[[], Detector]) -> None:
    with pytest.raises(ValueError):
        make()


WARMS = {
    "robust_z": 30,
    "cusum": 30,
    "iqr": 25,
    "iqr_detrend": 25,
    "rise": 20,
    "plateau": 300,
    "share": 50.0,
    "trend": 300.0,
    "trend_peaks": 600.0,
}


@pytest.mark.parametrize("name", list(DETECTORS))
def test_a_detector_says_it_is_warming_up_until_it_can_judge(name: str) -> None:
    detector = DETECTORS[name]()
    if name not in WARMS:  # judges from the first sample
        assert detector.warming_up() is None
        return
    start = detector.warming_up()
    assert start is not None and (start.seen, start.needed) == (0, WARMS[name])
    detector.update(TS[:3], NOISE[:3])
    assert detector.warming_up() is not None and 0 < detector.warming_up().seen < WARMS[name]  # type: ignore[union-attr]
    detector.update(TS[3:], NOISE[3:])
    assert detector.warming_up() is None
