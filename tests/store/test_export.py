"""export_parquet() writes a scenario-shaped file."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from stepwatch.model import NO_STEP, SeriesKey
from stepwatch.store import Store

from .conftest import T0, batch

KEYS = [
    SeriesKey.of("train.step_time_s", {"run": "r1", "rank": r, "node": f"n{r // 2}"})
    for r in range(4)
]


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
