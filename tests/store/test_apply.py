"""apply(): exact round trips, at-most-once per (source, seq), all-or-nothing transactions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepwatch.model import NO_STEP, Event, SeriesKey
from stepwatch.store import Store, _store

from .conftest import T0, batch

LOSS = SeriesKey.of("loss", {"run": "r1"})
TEMP = SeriesKey.of("gpu.temp_c", {"run": "r1", "node": "node0", "gpu": 3})
AWKWARD = [1.5, math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 0.1]


def test_values_steps_and_non_finite_survive_bit_for_bit(store: Store) -> None:
    n = len(AWKWARD)
    steps = [0, NO_STEP, 2, 3, NO_STEP, 5, 6, 7]
    assert store.apply([batch([LOSS], [0] * n, T0 + np.arange(n), AWKWARD, step=steps)]) == [True]
    (info,) = store.series("train.loss")
    got = store.raw(info.id)
    np.testing.assert_array_equal(got["ts"], T0 + np.arange(n))
    np.testing.assert_array_equal(got["step"], steps)
    assert got["value"].tobytes() == np.array(AWKWARD).tobytes()
    assert got["step"].dtype == np.int64


def test_raw_is_time_ordered_and_honours_range_and_limit(store: Store) -> None:
    ts = T0 + np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    store.apply([batch([LOSS], [0] * 5, ts, ts - T0)])
    (info,) = store.series()
    np.testing.assert_array_equal(store.raw(info.id)["value"], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(store.raw(info.id, T0 + 2, T0 + 4)["value"], [2, 3, 4])
    np.testing.assert_array_equal(store.raw(info.id, start=T0 + 2, limit=2)["value"], [2, 3])


def test_series_are_registered_once_and_filtered_by_labels(store: Store) -> None:
    store.apply([batch([LOSS, TEMP], [0, 1], [T0, T0], [1.0, 2.0], seq=1)])
    store.apply([batch([TEMP, LOSS], [0, 1], [T0 + 1, T0 + 1], [3.0, 4.0], seq=2)])
    assert [i.key for i in store.series()] == [LOSS, TEMP]
    assert [i.key for i in store.series(match={"node": "node0"})] == [TEMP]
    assert [i.key for i in store.series("gpu.temp_c", {"gpu": "3", "run": "r1"})] == [TEMP]
    assert [i.key for i in store.series("loss")] == [LOSS]  # the alias finds train.loss
    assert store.series("gpu.temp_c", {"gpu": "4"}) == []
    (temp,) = store.series("gpu.temp_c")
    np.testing.assert_array_equal(store.raw(temp.id)["value"], [2.0, 3.0])


def test_a_seq_at_or_below_the_last_applied_one_is_a_duplicate(store: Store) -> None:
    first = batch([LOSS], [0], [T0], [1.0], source="a", seq=5)
    assert store.last_seq("a") is None
    assert store.apply([first, first]) == [True, False]
    older = batch([LOSS], [0], [T0 + 1], [2.0], source="a", seq=4)
    other = batch([LOSS], [0], [T0 + 2], [3.0], source="b", seq=1)
    assert store.apply([older, other]) == [False, True]
    assert (store.last_seq("a"), store.last_seq("b")) == (5, 1)
    (info,) = store.series()
    np.testing.assert_array_equal(store.raw(info.id)["value"], [1.0, 3.0])


def test_events_travel_with_their_batch(store: Store) -> None:
    ev = Event(T0, "checkpoint", "saved step 10", {"run": "r1", "rank": "0"}, {"bytes": 123})
    b = batch([LOSS], [0], [T0], [1.0], events=[ev])
    store.apply([b, b])
    assert store.events() == [ev]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (batch([LOSS], [0, 1], [T0, T0], [1.0, 2.0], seq=2), ValueError),  # unknown series index
        (batch([LOSS], [0], [math.nan], [1.0], seq=2), ValueError),  # timestamp not finite
        (batch([LOSS], [0], [1e300], [1.0], seq=2), ValueError),  # beyond the time buckets
        (batch([LOSS], [0], [T0], [1.0], seq=2**63), ValueError),  # beyond the seq column
        (
            batch([LOSS], [0], [T0], [1.0], seq=2, events=[Event(T0, "x", data={"o": object()})]),
            TypeError,
        ),
    ],
)
def test_a_bad_batch_stores_nothing_of_any_batch(
    store: Store, bad: object, error: type[Exception]
) -> None:
    good = batch([TEMP], [0], [T0], [1.0], source="good", seq=1)
    with pytest.raises(error):
        store.apply([good, bad])  # type: ignore[list-item]
    assert store.stats()["samples"] == 0
    assert (store.series(), store.events(), store.last_seq("good")) == ([], [], None)
    assert store.apply([good]) == [True]
    assert [i.key for i in store.series()] == [TEMP]


def test_a_failure_inside_the_transaction_rolls_everything_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.apply([batch([LOSS], [0], [T0], [1.0], seq=1)])
    real_write = _store.write

    def write_then_fail(cur: object, prep: object) -> None:
        real_write(cur, prep)  # type: ignore[arg-type]
        raise OSError("disk full")

    monkeypatch.setattr(_store, "write", write_then_fail)
    with pytest.raises(OSError, match="disk full"):
        store.apply([batch([LOSS, TEMP], [0, 1], [T0 + 1, T0 + 1], [2.0, 3.0], seq=2)])
    monkeypatch.undo()
    assert store.stats()["samples"] == 1
    assert [i.key for i in store.series()] == [LOSS]
    assert store.last_seq("src") == 1
    assert store.apply([batch([TEMP], [0], [T0 + 2], [4.0], seq=2)]) == [True]
    assert [(i.id, i.key) for i in store.series()] == [(0, LOSS), (1, TEMP)]
    assert store.stats()["samples"] == 2
