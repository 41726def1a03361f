"""latest(): the newest sample of each series, from tier rows and raw rows alike."""

from __future__ import annotations

import math

from stepwatch.model import NO_STEP, SeriesKey
from stepwatch.store import Store

from .conftest import T0, batch

LOSS = SeriesKey.of("loss", {"run": "r1"})
UTIL0 = SeriesKey.of("gpu.util_pct", {"run": "r1", "node": "n0", "gpu": 0})
UTIL1 = SeriesKey.of("gpu.util_pct", {"run": "r1", "node": "n1", "gpu": 0})


def test_newest_sample_per_series_with_its_step(store: Store) -> None:
    keys = [LOSS, UTIL0, UTIL1]
    store.apply(
        [
            batch(
                keys,
                [0, 0, 1, 2, 1],
                [T0, T0 + 5, T0 + 1, T0 + 1, T0 + 2],
                [3.0, 2.5, 90.0, 80.0, math.nan],
                step=[10, 11, NO_STEP, NO_STEP, NO_STEP],
                seq=1,
            )
        ]
    )
    want = [(LOSS, T0 + 5, 11, 2.5), (UTIL0, T0 + 2, NO_STEP, math.nan), (UTIL1, T0 + 1, -1, 80.0)]
    _check(store.latest(), want)
    store.compact()
    _check(store.latest(), want)
    late = batch(keys, [0, 2], [T0 + 4, T0 + 900], [9.0, 70.0], step=[9, NO_STEP], seq=2)
    store.apply([late])  # an older loss sample arrives late; it is not the newest
    want[2] = (UTIL1, T0 + 900, NO_STEP, 70.0)
    _check(store.latest(), want)
    _check(store.latest("gpu.util_pct", {"node": "n1"}), want[2:])
    assert store.latest("no.such_metric") == []


def test_equal_timestamps_resolve_to_the_later_write(store: Store) -> None:
    store.apply([batch([LOSS], [0], [T0], [1.0], seq=1)])
    store.compact()
    store.apply([batch([LOSS], [0], [T0], [2.0], seq=2)])
    _check(store.latest(), [(LOSS, T0, NO_STEP, 2.0)])
    store.compact()
    _check(store.latest(), [(LOSS, T0, NO_STEP, 2.0)])


def _check(got: list[tuple[SeriesKey, float, int, float]], want: list[tuple]) -> None:
    assert [(k, ts, step) for k, ts, step, _ in got] == [(k, ts, step) for k, ts, step, _ in want]
    for (*_, g), (*_, w) in zip(got, want, strict=True):
        assert g == w or (math.isnan(g) and math.isnan(w))
