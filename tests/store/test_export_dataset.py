"""Hive-partitioned datasets (samples, alerts, runs; project=P/run=R/day=D): read as they are by
DuckDB, pyarrow and Polars, one project's alone when asked, and by a local PySpark session that
runs the fleet analysis guide's lemon-node query."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow.dataset as ds
import pytest

from stepwatch.model import Event, RecordBatch, Run, SeriesKey
from stepwatch.store import Store

from .conftest import T0, batch

DAY = 86_400.0
#: Runs and their projects; node n2 is slow in every run (a lemon).
RUNS = {"a": "p1", "b": "p1", "c": "p2"}
STEP_S = {"n0": 1.0, "n1": 1.05, "n2": 1.6}


def _fill(store: Store) -> int:
    """Three runs over two days: step time per rank on three nodes, a GPU's temperature of
    no run, and one alert per run; the samples written."""
    written = 0
    for i, (run, project) in enumerate(RUNS.items()):
        store.upsert_run(Run(run, project, run, start=T0 + i, planned_total_steps=100))
        keys = [SeriesKey.of("train.step_time_s", {"run": run, "rank": str(r), "node": node})
                for r, node in enumerate(STEP_S)]  # fmt: skip
        steps = np.arange(100)
        ts = T0 + np.linspace(0, 1.5 * DAY, 100)  # across midnight
        series = np.repeat(np.arange(len(keys)), 100)
        values = np.concatenate([np.full(100, s) for s in STEP_S.values()])
        store.apply([batch(keys, series, np.tile(ts, len(keys)), values,
                           step=np.tile(steps, len(keys)), source=run)])  # fmt: skip
        written += len(series)
        alert = {"id": f"al-{run}", "rule": "R", "kind": "straggler", "state": "firing",
                 "severity": "warning", "since": T0}  # fmt: skip
        event = Event(T0 + 10, "alert", "straggler", {"run": run, "node": "n2"}, alert)
        store.apply([RecordBatch.of(f"rec-{run}", [event])])
    temp = SeriesKey.of("gpu.temp_c", {"node": "n2", "gpu": "0"})
    store.apply([batch([temp], np.zeros(10, int), T0 + np.arange(10), np.full(10, 70.0))])
    return written + 10


@pytest.fixture
def dataset(store: Store, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    total = _fill(store)
    rows = store.export_dataset(tmp_path / "fleet")
    assert rows == {"samples": total, "alerts": 3, "gpus": 0, "runs": 3}
    yield tmp_path / "fleet", total


def test_the_layout_is_hive_s(dataset: tuple[Path, int]) -> None:
    out, _ = dataset
    folders = {
        str(p.parent.relative_to(out / "samples")) for p in (out / "samples").rglob("*.parquet")
    }
    assert "project=p1/run=a/day=2026-05-28" in folders
    assert "project=p1/run=a/day=2026-05-29" in folders  # a day a partition
    assert (
        "project=__HIVE_DEFAULT_PARTITION__/run=__HIVE_DEFAULT_PARTITION__/day=2026-05-28"
        in folders
    )


def test_duckdb_pyarrow_and_polars_read_it_as_it_is(dataset: tuple[Path, int]) -> None:
    out, total = dataset
    pattern = str(out / "samples" / "**" / "*.parquet")
    by_run = duckdb.sql(
        f"SELECT run, project, count(*) FROM read_parquet('{pattern}', hive_partitioning=true) "
        "GROUP BY ALL ORDER BY run NULLS LAST"
    ).fetchall()
    assert by_run == [("a", "p1", 300), ("b", "p1", 300), ("c", "p2", 300), (None, None, 10)]
    table = ds.dataset(out / "samples", format="parquet", partitioning="hive").to_table()
    assert table.num_rows == total and set(table.column("project").to_pylist()) == {
        "p1",
        "p2",
        None,
    }
    frame = pl.scan_parquet(out / "alerts", hive_partitioning=True).collect()
    assert sorted(frame["run"].to_list()) == ["a", "b", "c"]
    assert set(frame["node"].to_list()) == {"n2"} and set(frame["kind"]) == {"straggler"}


def test_one_project_alone(store: Store, tmp_path: Path) -> None:
    _fill(store)
    rows = store.export_dataset(tmp_path / "p2", project="p2")
    assert rows == {"samples": 300, "alerts": 1, "gpus": 0, "runs": 1}
    assert {p.name for p in (tmp_path / "p2" / "samples").iterdir()} == {"project=p2"}


def test_pyspark_runs_the_lemon_node_query(dataset: tuple[Path, int], tmp_path: Path) -> None:
    """The guide's query, verbatim, on a local Spark session: n2 is slow in every run."""
    pyspark = pytest.importorskip("pyspark", reason="pip install '.[dev]' brings it")
    pyspark_sql = pytest.importorskip("pyspark.sql")
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    out, total = dataset
    spark = (
        pyspark_sql.SparkSession.builder.master("local[1]").appName("stepwatch-test")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1").config("spark.local.dir", str(tmp_path))
        .getOrCreate()
    )  # fmt: skip
    gateway = spark.sparkContext._gateway
    try:
        samples = spark.read.parquet(str(out / "samples"))
        assert samples.count() == total
        samples.createOrReplaceTempView("samples")
        lemons = spark.sql(LEMON_QUERY).collect()
    finally:
        spark.stop()
        gateway.shutdown()  # py4j's threads go with the session
        gateway.proc.stdin.close()  # and the JVM, which ends when its stdin does
        gateway.proc.wait(timeout=60)
        pyspark.SparkContext._gateway = pyspark.SparkContext._jvm = None
    assert [row["node"] for row in lemons] == ["n2"]
    assert math.isclose(lemons[0]["runs_slow"], 3)


#: docs/fleet-analysis.md's lemon-node query.
LEMON_QUERY = (
    (Path(__file__).parents[2] / "docs" / "fleet-analysis.md")
    .read_text()
    .split("```sql lemon-nodes\n")[1]
    .split("```")[0]
)
