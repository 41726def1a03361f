"""retain() drops old data from every table; export_parquet() writes a scenario-shaped file."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stepwatch.model import NO_STEP, Event, SeriesKey
from stepwatch.store import Store

from .conftest import T0, FakeClock, batch

KEYS = [
    SeriesKey.of("train.step_time_s", {"run": "r1", "rank": r, "node": f"n{r // 2}"})
    for r in range(4)
]


def _fill(store: Store, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = 40_000
    data = {
        "series": rng.integers(0, 4, n),
        "ts": T0 + rng.uniform(0, 10_000, n),
        "value": rng.lognormal(0, 0.2, n),
    }
    half = n // 2
    store.apply([batch(KEYS, *(v[:half] for v in data.values()), seq=1)])
    store.compact()
    store.apply([batch(KEYS, *(v[half:] for v in data.values()), seq=2)])
    return data


def test_retention_deletes_samples_events_and_their_tier_rows(
    store: Store, clock: FakeClock
) -> None:
    data = _fill(store, np.random.default_rng(5))
    store.apply(
        [batch(KEYS, [], [], [], seq=3, events=[Event(T0 + 10, "a"), Event(T0 + 9000, "b")])]
    )
    clock.now = T0 + 10_000 + 5_432.1  # cutoff T0 + 4_432.1: mid tier bucket
    cutoff = clock.now - 11_000
    deleted = store.retain(11_000)
    kept = data["ts"] >= cutoff
    assert deleted == int((~kept).sum())
    assert store.stats()["samples"] == int(kept.sum())
    assert [e.kind for e in store.events()] == ["b"]
    assert store.raw(0)["ts"].min() >= cutoff
    for compact in (False, True):
        if compact:
            store.compact()
        got = store.downsample(0, T0, T0 + 10_000, 3)  # 3300 s buckets: 300 s tier rows
        sel = kept & (data["series"] == 0)
        assert got["count"].sum() == sel.sum()
        assert got["min"].min() == data["value"][sel].min()
        (pct,) = store.percentiles("train.step_time_s", None, T0, T0 + 10_000, 3)
        assert pct["count"].sum() == kept.sum()
        assert store.latest()[0][1] == data["ts"][data["series"] == 0].max()
    assert store.retain(11_000) == 0


def test_export_parquet_reads_back_with_pyarrow(store: Store, tmp_path: Path) -> None:
    other = SeriesKey.of("loss", {"run": "r2"})
    gpu = SeriesKey.of("gpu.temp_c", {"run": "r1", "node": "n0", "gpu": 3, "pod": "p"})
    store.apply(
        [
            batch(
                [KEYS[1], other, gpu],
                [0, 1, 2, 0],
                [T0 + 2, T0 + 1, T0 + 3, T0 + 1],
                [math.nan, 7.0, -math.inf, 0.5],
                step=[5, 6, NO_STEP, 4],
            )
        ]
    )
    path = store.export_parquet("r1", tmp_path / "r1.parquet")
    table = pq.read_table(path)
    assert table.column_names == [
        "ts", "run", "name", "value", "step", "node", "rank", "gpu", "labels"
    ]  # fmt: skip
    assert table.schema.field("rank").type == pa.int64()
    rows = table.to_pylist()
    assert [(r["ts"], r["name"], r["step"], r["node"], r["rank"], r["gpu"]) for r in rows] == [
        (T0 + 1, "train.step_time_s", 4, "n0", 1, None),
        (T0 + 2, "train.step_time_s", 5, "n0", 1, None),
        (T0 + 3, "gpu.temp_c", None, "n0", None, 3),
    ]
    assert [r["value"] for r in rows][::2] == [0.5, -math.inf] and math.isnan(rows[1]["value"])
    assert {r["run"] for r in rows} == {"r1"}
    assert rows[2]["labels"] == '{"gpu":"3","node":"n0","pod":"p","run":"r1"}'
