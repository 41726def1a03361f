"""Retention: the policy, deletion of only what is past its age and rolled up, answers from the
tiers once raw samples are gone, bounded chunks, shedding and the store's size."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from stepwatch._encryption import create_key_file, read_key_file
from stepwatch.model import Event, SeriesKey
from stepwatch.store import DEFAULT_RETENTION, Kept, Retention, Store
from stepwatch.store._plan import Plan, plan

from .conftest import T0, FakeClock, batch

DAY = 86_400.0
KEYS = [SeriesKey.of("gpu.util_pct", {"node": "n0", "gpu": g}) for g in range(3)]
#: Short ages so a test's data spans them all: raw 2 days, 10 s tier 4, 300 s tier 6.
POLICY = Retention.parse("raw=2d,10s=4d,300s=6d,events=3d")
SPAN = 8 * DAY
STEP = 30.0


def test_the_defaults_are_bounded_and_spelled_as_documented() -> None:
    assert str(DEFAULT_RETENTION) == "raw=14d,10s=90d,300s=2y,events=90d"
    assert Retention.parse("raw=7d") == Retention(7 * DAY, DEFAULT_RETENTION.tiers_s, 90 * DAY)
    assert str(Retention.parse(" 300s=3y , raw=36h ")) == "raw=36h,10s=90d,300s=3y,events=90d"
    assert all(math.isfinite(a) for a in (DEFAULT_RETENTION.raw_s, *DEFAULT_RETENTION.tiers_s))


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("raw=14d,60s=30d", "unknown key '60s': one of raw, 10s, 300s, events"),
        ("raw=fortnight", "raw: bad duration 'fortnight' (a positive number and a unit"),
        ("raw=0d", "raw: bad duration '0d'"),
        ("raw=14", "raw: bad duration '14'"),
        ("14d", "'14d' has no key: write KEY=AGE, e.g. raw=14d"),
        ("raw=1d,raw=2d", "raw is given twice"),
        ("10s=90d,300s=30d", "the 300s tier (30d) would go before the 10s tier (90d)"),
        ("raw=100d", "the 10s tier (90d) would go before raw samples (100d)"),
        ("raw=10m", "raw=10m is under the 1h minimum"),
    ],
)
def test_a_policy_mistake_is_one_clear_sentence(spec: str, said: str) -> None:
    with pytest.raises(ValueError) as caught:
        Retention.parse(spec)
    assert said in str(caught.value)


def _fill(store: Store, clock: FakeClock, late: bool = True) -> dict[str, np.ndarray]:
    """SPAN of samples every STEP s per series, compacted; then late samples of the first day
    that are not compacted yet; and an event per day."""
    ts = np.repeat(T0 + np.arange(0, SPAN, STEP), len(KEYS))
    series = np.tile(np.arange(len(KEYS)), ts.size // len(KEYS))
    value = np.random.default_rng(3).normal(50, 10, ts.size)
    events = [Event(T0 + d * DAY, "checkpoint") for d in range(8)]
    clock.now = T0 + SPAN
    store.apply([batch(KEYS, series, ts, value, seq=1, events=events)])
    store.compact()
    if late:
        store.apply([batch(KEYS, [0, 1], [T0 + 7.0, T0 + 11.0], [1.0, 2.0], seq=2)])
    return {"ts": ts, "series": series, "value": value}


def test_retention_deletes_only_what_is_past_its_age_and_rolled_up(
    store: Store, clock: FakeClock
) -> None:
    data = _fill(store, clock)
    newest = data["ts"].max()  # ages count back from the newest sample
    cut = POLICY.cutoffs(newest)
    assert cut.raw == math.floor((newest - 2 * DAY) / 300) * 300  # on a 300 s boundary
    done = store.retention.retain(POLICY)
    assert done.samples > 0 and done.tier_rows > 0 and done.events == 5
    for sid in range(len(KEYS)):
        kept = store.raw(sid)["ts"]
        old = kept[kept < cut.raw]
        assert list(old) == ([T0 + 7.0] if sid == 0 else [T0 + 11.0] if sid == 1 else [])
        rest = (data["series"] == sid) & (data["ts"] >= cut.raw)
        assert kept[kept >= cut.raw].tolist() == data["ts"][rest].tolist()  # all of the rest
    assert [e.ts for e in store.events()] == [T0 + d * DAY for d in (5, 6, 7)]
    assert store.retention.kept() == cut
    store.compact()  # the late samples are rolled up now: the next pass takes them
    assert store.retention.retain(POLICY).samples == 2
    again = store.retention.retain(POLICY)  # the tables cut at their horizons are not scanned again
    assert (again.samples, again.tier_rows, again.events) == (0, 0, 0)
    clock.now += 300
    store.apply([batch(KEYS, [2], [clock.now], [0.0], seq=3)])
    assert (
        store.retention.retain(POLICY).samples == len(KEYS) * 300 / STEP
    )  # 5 minutes more of each


def _buckets(store: Store, start: float, end: float, points: int) -> dict[str, list[float]]:
    got = store.downsample(0, start, end, points)
    return {k: v.tolist() for k, v in got.items()}


def test_a_range_whose_raw_samples_are_gone_is_answered_from_the_tiers(
    store: Store, clock: FakeClock
) -> None:
    data = _fill(store, clock, late=False)
    mine = data["series"] == 0
    first = math.ceil((T0 + 2.5 * DAY) / 3600) * 3600  # after the 300 s tier's horizon
    hourly = (first, first + 5 * DAY, 5 * 24)  # whole 1 h buckets
    before = _buckets(store, *hourly)
    coarse = store.percentiles("gpu.util_pct", None, *hourly)[0]["count"].tolist()
    store.retention.retain(POLICY)
    cut = store.retention.kept()
    assert store.raw(0, end=cut.raw)["ts"].size == 0
    assert _buckets(store, *hourly) == before  # the 300 s tier answers the old days
    assert store.percentiles("gpu.util_pct", None, *hourly)[0]["count"].tolist() == coarse

    start = cut.raw - 1234.5  # raw gone, mid 10 s bucket: that whole bucket counts
    fine = store.downsample(0, start, start + 600, 60)  # 10 s buckets asked
    assert np.all(fine["ts"] % 10 == 0) and fine["ts"].size == 20  # a sample every 30 s
    lo = math.floor(start / 10) * 10
    assert fine["count"].sum() == np.sum(mine & (data["ts"] >= lo) & (data["ts"] <= start + 600))

    old = cut.tier(10) - 3 * 3600 + 17.0  # before the 10 s tier's horizon: 300 s buckets
    got = store.downsample(0, old, old + 7200, 120)  # 60 s asked
    assert np.all(np.diff(got["ts"]) == 300.0)
    lo = math.floor(old / 300) * 300
    want = mine & (data["ts"] >= lo) & (data["ts"] < math.ceil((old + 7200) / 300) * 300)
    assert got["count"].sum() == want.sum()
    assert got["max"].max() == data["value"][want].max()


def test_each_transaction_deletes_a_bounded_chunk(store_path: Path, clock: FakeClock) -> None:
    with Store(store_path, clock=clock) as store:
        _fill(store, clock, late=False)
        done = store.retention.retain(POLICY, chunk_rows=1000)
        left = store.stats()["samples"]
    assert 0 < done.largest_chunk <= 1000
    assert done.samples > 10 * 1000
    with Store(store_path.with_name("other.duckdb"), clock=clock) as other:
        _fill(other, clock, late=False)
        whole = other.retention.retain(POLICY)
        assert (whole.samples, whole.tier_rows, whole.events) == (
            done.samples,
            done.tier_rows,
            done.events,
        )
        assert other.stats()["samples"] == left


def test_horizons_survive_a_reopen_and_never_move_back(store_path: Path, clock: FakeClock) -> None:
    with Store(store_path, clock=clock) as store:
        _fill(store, clock, late=False)
        store.retention.retain(POLICY)
        cut = store.retention.kept()
    with Store(store_path, clock=clock) as store:
        assert store.retention.kept() == cut
        assert store.retention.retain(Retention.parse("raw=5d,10s=6d,300s=7d")).samples == 0
        assert store.retention.kept() == cut


def test_shedding_gives_up_raw_samples_first_then_the_fine_tier_then_events(
    store: Store, clock: FakeClock
) -> None:
    _fill(store, clock, late=False)
    full = store.footprint.disk_bytes()
    assert full >= store.path.stat().st_size // 2  # blocks in use, not a guess
    shed = []
    while (what := store.retention.shed()) is not None:
        shed.append(what)
        assert len(shed) < 200
    order = list(dict.fromkeys(shed))
    assert order == ["raw", "10s", "events"]
    assert (
        store.stats()["samples"] == 0
        or store.raw(0)["ts"].min() >= math.floor(clock.now / 300) * 300 - 300
    )
    assert store.events() == []
    latest = store.latest()  # the coarsest tier keeps every series' history
    assert len(latest) == len(KEYS)
    week = store.downsample(0, T0, T0 + SPAN, 8)
    assert week["count"].sum() == SPAN / STEP  # every sample, counted in the 300 s tier
    assert store.footprint.disk_bytes() < full


def test_ages_count_from_the_newest_sample_and_never_from_the_future(
    store_path: Path, clock: FakeClock
) -> None:
    with Store(store_path, clock=clock) as store:
        data = _fill(store, clock, late=False)
        future = T0 + SPAN + 365 * DAY  # a producer's clock a year ahead
        store.apply([batch(KEYS, [2], [future], [0.0], seq=5)])
        store.retention.retain(POLICY)
        assert store.retention.kept() == POLICY.cutoffs(clock.now)  # capped at now, not a year on
    clock.now += 100 * DAY  # opened again long after its last sample
    with Store(store_path, clock=clock) as store:
        assert store.retention.retain(POLICY).samples == 0
        kept = store.raw(0)["ts"]
        assert kept.min() < data["ts"].max() - DAY  # the last days before it stopped are there


def test_an_encrypted_store_measures_its_size_and_keeps_its_retention(
    tmp_path: Path, clock: FakeClock
) -> None:
    key = read_key_file(create_key_file(tmp_path / "store.key"))
    with Store(tmp_path / "sealed.duckdb", clock=clock, key=key) as store:
        _fill(store, clock, late=False)
        assert store.footprint.disk_bytes() > 0
        assert store.retention.retain(POLICY).samples > 0
        assert store.retention.shed() == "raw"
        assert store.retention.kept().raw > POLICY.cutoffs(clock.now).raw


def test_a_pass_told_to_stop_ends_after_its_chunk_and_the_next_goes_on(
    store: Store, clock: FakeClock
) -> None:
    _fill(store, clock, late=False)
    answers = iter([False])  # one chunk, then stop
    first = store.retention.retain(POLICY, chunk_rows=1000, stop=lambda: next(answers, True))
    assert (first.samples, first.tier_rows, first.events) == (1000, 0, 0)
    rest = store.retention.retain(POLICY)
    assert rest.samples > 0 and rest.tier_rows > 0 and rest.events == 5
    assert store.raw(0, end=store.retention.kept().raw - 1)["ts"].size == 0


def _expected(data: dict[str, np.ndarray], kept: Kept, p: Plan) -> np.ndarray:
    """The samples of series 0 a plan's buckets hold once retention has run: within the range
    (stretched to whole tier buckets where raw samples are gone), and still kept somewhere."""
    ts = data["ts"]
    lo, hi = p.start, p.end
    closed_hi = True
    if p.tier is not None and p.start < kept.raw:
        lo = math.floor(p.start / p.tier) * p.tier
        if p.end < kept.raw:
            hi, closed_hi = math.ceil(p.end / p.tier) * p.tier, False
    inside = (ts >= lo) & ((ts <= hi) if closed_hi else (ts < hi))
    held = (ts >= kept.raw) | ((ts >= kept.tier(p.tier)) if p.tier else False)
    return (data["series"] == 0) & inside & held


def test_random_ranges_after_retention_count_what_is_kept(store: Store, clock: FakeClock) -> None:
    data = _fill(store, clock, late=False)
    store.retention.retain(POLICY)
    kept = store.retention.kept()
    rng = np.random.default_rng(11)
    for _ in range(60):
        start = T0 + rng.uniform(2 * DAY, SPAN - 60)  # from the 300 s tier's horizon on
        end = min(T0 + SPAN, start + rng.uniform(60, 5 * DAY))
        points = int(rng.integers(1, 400))
        p = plan(start, end, points, kept=kept)
        got = store.downsample(0, start, end, points)
        want = _expected(data, kept, p)
        assert got["count"].sum() == want.sum(), (start - T0, end - T0, points, p)
        if want.any():
            assert got["max"].max() == data["value"][want].max()
