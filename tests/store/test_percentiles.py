"""percentiles(): quantiles across series per bucket, within 1% of numpy, by label or overall."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepwatch.model import SeriesKey
from stepwatch.store import Store
from stepwatch.store._plan import plan

from .conftest import T0, batch

RANKS = 16
STEPS = 6000
NAME = "train.step_time_s"
KEYS = [SeriesKey.of(NAME, {"run": "r1", "rank": r, "node": f"n{r // 4}"}) for r in range(RANKS)]
OTHER_RUN = SeriesKey.of(NAME, {"run": "r2", "rank": 0, "node": "n0"})
QS = (0.0, 0.5, 0.9, 0.99, 1.0)


def _dataset(rng: np.random.Generator, first_step: int, steps: int) -> dict[str, np.ndarray]:
    """Every rank's step time at every step; node n2 is slow; a few NaN and Inf to skip."""
    step = np.repeat(np.arange(first_step, first_step + steps), RANKS)
    rank = np.tile(np.arange(RANKS), steps)
    value = rng.lognormal(0.0, 0.3, step.shape[0]) * np.where(rank // 4 == 2, 1.5, 1.0)
    value[rng.random(value.shape[0]) < 0.01] = math.nan
    value[rng.integers(0, value.shape[0], 10)] = math.inf
    return {"series": rank, "ts": T0 + step + rng.uniform(0, 0.5, step.shape[0]), "value": value}


def _reference(
    data: dict[str, np.ndarray], start: float, end: float, points: int, by_node: bool
) -> dict[str, dict[float, list[float]]]:
    p = plan(start, end, points)
    ts, value = data["ts"], data["value"]
    keep = np.isfinite(value) & (ts >= start) & (ts <= end)
    bucket = np.floor((ts - p.origin) / p.width)
    label = data["series"] // 4 if by_node else np.zeros_like(data["series"])
    out: dict[str, dict[float, list[float]]] = {}
    for lbl in np.unique(label):
        entry: dict[float, list[float]] = {q: [] for q in QS}
        entry["count"] = []  # type: ignore[index]
        for b in np.unique(bucket[keep & (label == lbl)]):
            sel = keep & (label == lbl) & (bucket == b)
            for q in QS:
                entry[q].append(float(np.quantile(value[sel], q)))
            entry["count"].append(int(sel.sum()))  # type: ignore[index]
        out[f"n{lbl}" if by_node else ""] = entry
    return out


def _check(got: list[dict], want: dict[str, dict[float, list[float]]], by_node: bool) -> None:
    assert [g["labels"] for g in got] == [{"node": k} if by_node else {} for k in want]
    for entry, expected in zip(got, want.values(), strict=True):
        np.testing.assert_array_equal(entry["count"], expected["count"])  # type: ignore[index]
        assert list(entry["q"]) == list(QS)
        for q in QS:
            np.testing.assert_allclose(entry["q"][q], expected[q], rtol=0.02, err_msg=str(q))


QUERIES = [(T0, T0 + STEPS, 20), (T0 + 77.7, T0 + 5555.5, 200), (T0 + 100, T0 + 400, 150)]


def _apply(store: Store, data: dict[str, np.ndarray], seq: int) -> None:
    store.apply([batch(KEYS, data["series"], data["ts"], data["value"], seq=seq)])


def test_within_two_percent_of_numpy_from_raw_tier_and_mixed_rows(store: Store) -> None:
    rng = np.random.default_rng(3)
    data = _dataset(rng, 0, STEPS // 2)
    _apply(store, data, 1)
    store.apply([batch([OTHER_RUN], [0] * 100, T0 + np.arange(100), [1e6] * 100, seq=2)])
    answers = []
    for phase in ("raw", "compacted", "mixed"):
        if phase == "compacted":
            store.compact()
        if phase == "mixed":
            more = _dataset(rng, STEPS // 2, STEPS // 2)
            _apply(store, more, 3)
            data = {k: np.concatenate([data[k], more[k]]) for k in data}
        for start, end, points in QUERIES:
            for by_node in (False, True):
                by = "node" if by_node else None
                got = store.percentiles(NAME, {"run": "r1"}, start, end, points, QS, by=by)
                _check(got, _reference(data, start, end, points, by_node), by_node)
                answers.append(got)
    for raw, compacted in zip(answers[:6], answers[6:12], strict=True):  # same bins either way
        for a, b in zip(raw, compacted, strict=True):
            for q in QS:
                np.testing.assert_array_equal(a["q"][q], b["q"][q])


def test_label_filters_that_split_histogram_groups_read_raw_samples(store: Store) -> None:
    data = _dataset(np.random.default_rng(4), 0, 2000)
    _apply(store, data, 1)
    store.compact()
    (one,) = store.percentiles(NAME, {"rank": "5"}, T0, T0 + 2000, 4, (0.5,))
    sel = (data["series"] == 5) & np.isfinite(data["value"])
    assert one["count"].sum() == sel.sum()
    by_rank = store.percentiles(NAME, None, T0, T0 + 2000, 1, (0.5,), by="rank")
    assert [e["labels"]["rank"] for e in by_rank] == sorted(str(r) for r in range(RANKS))
    (five,) = [e for e in by_rank if e["labels"] == {"rank": "5"}]
    np.testing.assert_allclose(five["q"][0.5], np.median(data["value"][sel]), rtol=0.01)


@pytest.mark.parametrize(
    "values", [[-3.0, -2.0, -1.0, -0.5], [0.0, 0.0, 0.0, 2.0], [1e-300, 1e300]]
)
def test_zero_negative_and_extreme_values(store: Store, values: list[float]) -> None:
    key = SeriesKey.of("x", {})
    store.apply([batch([key], [0] * len(values), T0 + np.arange(len(values)), values)])
    for _ in range(2):
        (got,) = store.percentiles("x", None, T0, T0 + 100, 1, (0.0, 0.5, 1.0))
        want = np.quantile(values, [0.0, 0.5, 1.0])
        np.testing.assert_allclose([got["q"][q][0] for q in (0.0, 0.5, 1.0)], want, rtol=0.01)
        store.compact()


def test_no_matching_series_or_samples(store: Store) -> None:
    (empty,) = store.percentiles("no.such", None, T0, T0 + 10, 5)
    assert empty["labels"] == {} and empty["ts"].shape == (0,) and empty["q"][0.5].shape == (0,)
    assert store.percentiles("no.such", None, T0, T0 + 10, 5, by="node") == []
    with pytest.raises(ValueError):
        store.percentiles(NAME, None, T0, T0 + 10, 5, qs=(50,))
