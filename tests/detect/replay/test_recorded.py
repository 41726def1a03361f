"""read_recorded() streams scenario directories, Parquet exports and store runs in data time,
and refuses bad inputs with errors that name the path."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stepwatch.detect.replay._recorded import Chunk, RecordingError, describe, read_recorded
from stepwatch.model import NO_STEP, Event, Run, SampleBatch, SeriesKey
from stepwatch.store import Store, StoreError

T0 = 1_780_000_000.0
RUN = "s000-01-test"

Row = dict[str, Any]


def scenario_rows() -> list[Row]:
    """Samples in the scenario layout: run-level, per-rank, per-GPU and per-node series,
    timestamps shared by several rows, NaN and +-Inf values, null labels and steps."""
    rows: list[Row] = []
    for i in range(30):
        ts = T0 + i // 2  # two ticks per second: every ts holds several rows
        rows.append(
            dict(ts=ts, name="train.loss", value=1.0 / (i + 1), step=i, node="node0", rank=0)
        )
        rows.append(dict(ts=ts, name="train.step_time_s", value=0.5, step=i, node="node1", rank=5))
        if i % 3 == 0:
            temp = [math.nan, math.inf, -math.inf][i % 9 // 3]
            rows.append(dict(ts=ts, name="gpu.temp_c", value=temp, node="node1", gpu=1))
            rows.append(dict(ts=ts, name="host.cpu_pct", value=float(i), node="node0"))
    for r in rows:
        r["run"] = RUN
    return rows


LOGS = [
    {"ts": T0 - 5.0, "node": "node0", "rank": 0, "line": "starting"},
    {"ts": T0 + 3.0, "node": "node1", "rank": 4, "line": "step 6 | loss 0.14"},
    {"ts": T0 + 3.0, "node": "node0", "rank": None, "line": "saved checkpoint"},
    {"ts": T0 + 9.5, "node": "node0", "rank": 0, "line": "eval at step 19"},
    {"ts": T0 + 40.0, "node": "node1", "rank": 4, "line": "NVRM: Xid 79"},
]


def write_scenario(d: Path, rows: list[Row], fmt: str, logs: list[Row] = LOGS) -> Path:
    """A scenario directory as the scenario generator lays it out."""
    d.mkdir(parents=True, exist_ok=True)
    cols = ("ts", "run", "name", "value", "step", "node", "rank", "gpu")
    if fmt == "parquet":
        types = dict(ts=pa.float64(), value=pa.float64(), step=pa.int64(), rank=pa.int64())
        table = pa.table(
            {c: pa.array([r.get(c) for r in rows], types.get(c, pa.string())) for c in cols[:7]}
            | {"gpu": pa.array([r.get("gpu") for r in rows], pa.int64())}
        )
        pq.write_table(table, d / "metrics.parquet")
    else:
        with gzip.open(d / "metrics.csv.gz", "wt") as f:
            f.write(",".join(cols) + "\n")
            for r in rows:
                cells = [repr(r[c]) if c in ("ts", "value") else r.get(c) for c in cols]
                f.write(",".join("" if v is None else str(v) for v in cells) + "\n")
    with (d / "logs.jsonl").open("w") as f:
        for rec in logs:
            f.write(json.dumps({"run": RUN, **rec}) + "\n")
    (d / "labels.json").write_text(json.dumps({"run": RUN, "planned_total_steps": 900}))
    return d


def flatten(chunks: list[Chunk]) -> list[tuple[Any, ...]]:
    """(name, labels, ts, step, value) of every sample, in the order delivered."""
    out = []
    for c in chunks:
        b = c.batch
        for i in range(len(b)):
            key = b.keys[int(b.series[i])]
            out.append((key.name, dict(key.labels), b.ts[i], int(b.step[i]), b.value[i]))
    return out


def expected(rows: list[Row]) -> list[tuple[Any, ...]]:
    out = []
    for r in rows:
        labels = {k: str(r[k]) for k in ("run", "node", "rank", "gpu") if r.get(k) is not None}
        out.append((r["name"], labels, r["ts"], r.get("step", NO_STEP), r["value"]))
    return out


def same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[:4] == w[:4]
        assert g[4] == w[4] or (math.isnan(g[4]) and math.isnan(w[4]))


def by_time(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Rows of one ts in a fixed order: name, then step."""
    return row[2], row[0], row[3]


def check_chunks(chunks: list[Chunk], events: list[Event] | None = None) -> list[Event]:
    """Chunks cover disjoint, ordered stretches of data time and deal out every event once."""
    prev_end = -math.inf
    delivered: list[Event] = []
    for i, c in enumerate(chunks):
        b = c.batch
        b.check()
        assert b.seq == i
        assert np.all(np.diff(b.ts) >= 0)
        if len(b):
            assert b.ts[0] > prev_end and b.ts[-1] <= c.end
        assert all(prev_end < e.ts <= c.end for e in b.events)
        assert [e.ts for e in b.events] == sorted(e.ts for e in b.events)
        if i:
            assert b.keys[: len(chunks[i - 1].batch.keys)] == chunks[i - 1].batch.keys
        prev_end = c.end
        delivered += b.events
    return delivered


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("size", [1, 7, 1000])
def test_scenario_reads_back_in_time_order(tmp_path: Path, fmt: str, size: int) -> None:
    rows = scenario_rows()
    d = write_scenario(tmp_path / RUN, rows, fmt)
    chunks = list(read_recorded(d, chunk_samples=size))
    same(flatten(chunks), expected(rows))
    events = check_chunks(chunks)
    assert [(e.ts, e.text) for e in events] == [(r["ts"], r["line"]) for r in LOGS]
    assert all(e.kind == "log" and e.labels["run"] == RUN for e in events)
    assert events[0].labels["rank"] == "0" and "rank" not in events[2].labels
    assert chunks[-1].end == LOGS[-1]["ts"]
    if size == 1000:
        assert len(chunks) == 1
    else:
        assert len(chunks) > 2
        assert max(len(c.batch) for c in chunks) >= size


def test_describe_counts_samples_and_reads_planned_steps(tmp_path: Path) -> None:
    rows = scenario_rows()
    for fmt in ("parquet", "csv"):
        info = describe(write_scenario(tmp_path / fmt, rows, fmt))
        assert (info.format, info.samples, info.planned_total_steps) == (fmt, len(rows), 900)
        assert info.path.parent == tmp_path / fmt


def test_events_outside_the_samples_still_arrive(tmp_path: Path) -> None:
    rows = scenario_rows()[:3]
    d = write_scenario(tmp_path / "d", rows, "parquet")
    chunks = list(read_recorded(d, chunk_samples=1))
    events = check_chunks(chunks)
    assert len(events) == len(LOGS)
    assert chunks[0].batch.events[0].text == "starting"
    only = write_scenario(tmp_path / "empty", [], "csv")
    (chunk,) = read_recorded(only)
    assert len(chunk.batch) == 0 and len(chunk.batch.events) == len(LOGS)


def test_scenario_without_logs_has_no_events(tmp_path: Path) -> None:
    d = write_scenario(tmp_path / "d", scenario_rows(), "parquet")
    (d / "logs.jsonl").unlink()
    (d / "labels.json").unlink()
    chunks = list(read_recorded(d, chunk_samples=10))
    assert not check_chunks(chunks) and describe(d).planned_total_steps is None


def fill_store(path: Path) -> list[SeriesKey]:
    keys = [
        SeriesKey.of("train.loss", {"run": "r1", "node": "n0", "rank": 0}),
        SeriesKey.of("gpu.temp_c", {"run": "r1", "node": "n0", "gpu": 3, "pod": "p"}),
        SeriesKey.of("train.loss", {"run": "r2"}),
    ]
    n = 40
    series = np.arange(n) % 3
    log = Event(T0 + 7.5, "log", "CUDA out of memory", {"run": "r1", "node": "n0"})
    other = [Event(T0 + 8, "checkpoint", "", {"run": "r1"}), Event(T0, "log", "x", {"run": "r2"})]
    batch = SampleBatch(
        "src",
        1,
        keys,
        series.astype(np.uint32),
        T0 + np.arange(n) // 4,
        np.where(series == 1, NO_STEP, np.arange(n)).astype(np.int64),
        np.where(np.arange(n) == 4, math.nan, np.arange(n) * 0.5),
        [log, *other],
    )
    with Store(path) as store:
        store.apply([batch])
    return keys


def test_parquet_export_and_store_run_read_the_same(tmp_path: Path) -> None:
    keys = fill_store(tmp_path / "s.duckdb")
    with Store(tmp_path / "s.duckdb") as store:
        export = store.export_parquet("r1", tmp_path / "r1.parquet")
        want = [
            (keys[sid].name, dict(keys[sid].labels), ts, step, value)
            for s in store.series(match={"run": "r1"})
            for sid in [s.id]
            for ts, step, value in zip(*store.raw(s.id).values(), strict=True)
        ]
    want.sort(key=lambda r: r[2])
    from_export = list(read_recorded(export, chunk_samples=5))
    from_store = list(read_recorded(tmp_path / "s.duckdb", run="r1", chunk_samples=5))
    assert not check_chunks(from_export)
    events = check_chunks(from_store)
    assert [(e.text, e.labels) for e in events] == [
        ("CUDA out of memory", {"run": "r1", "node": "n0"})
    ]
    for chunks in (from_export, from_store):
        same(sorted(flatten(chunks), key=by_time), sorted(want, key=by_time))
    assert describe(export).samples == len(want)
    assert describe(tmp_path / "s.duckdb", run="r1").samples == len(want)


def read_all(path: Path | Store, *, run: str | None = None, chunk_samples: int = 1000) -> int:
    """How many samples reading the whole input delivers."""
    return sum(len(c.batch) for c in read_recorded(path, run=run, chunk_samples=chunk_samples))


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="nope.*no such file"):
        read_all(tmp_path / "nope")
    with pytest.raises(RecordingError, match="no such file"):
        describe(tmp_path / "nope")


def test_directory_without_metrics(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=f"{tmp_path}.*no metrics.parquet"):
        read_all(tmp_path)


def test_unknown_file_format(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not a recording\n")
    with pytest.raises(RecordingError, match="notes.txt.*unknown format"):
        read_all(path)


def test_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"ts": [T0], "name": ["train.loss"]}), path)
    for call in (lambda: read_all(path), lambda: describe(path)):
        with pytest.raises(RecordingError, match="m.parquet.*missing columns run, value"):
            call()
    d = tmp_path / "csv"
    d.mkdir()
    with gzip.open(d / "metrics.csv.gz", "wt") as f:
        f.write("ts,run,name\n1.0,r,train.loss\n")
    with pytest.raises(RecordingError, match="metrics.csv.gz.*missing columns value"):
        read_all(d)


def test_corrupt_csv_and_bad_values(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "metrics.csv.gz").write_bytes(b"not gzip at all")
    with pytest.raises(RecordingError, match="metrics.csv.gz.*cannot read"):
        read_all(d)
    with gzip.open(d / "metrics.csv.gz", "wt") as f:
        f.write("ts,run,name,value\nsoon,r,train.loss,1.0\n")
    with pytest.raises(RecordingError, match="metrics.csv.gz"):
        read_all(d)


def test_missing_ts_and_bad_names(tmp_path: Path) -> None:
    path = tmp_path / "m.parquet"
    cols = {"run": ["r", "r"], "name": ["train.loss"] * 2, "value": [1.0, 2.0]}
    pq.write_table(pa.table({"ts": pa.array([T0, None], pa.float64()), **cols}), path)
    with pytest.raises(RecordingError, match="row 2: ts is missing"):
        read_all(path)
    cols["name"] = ["train loss!", "x"]
    pq.write_table(pa.table({"ts": [T0, T0], **cols}), path)
    with pytest.raises(RecordingError, match="m.parquet.*'train loss!'"):
        read_all(path)


@pytest.mark.parametrize("size", [1, 1000])
def test_unsorted_samples(tmp_path: Path, size: int) -> None:
    rows = scenario_rows()
    rows[5], rows[20] = rows[20], rows[5]
    d = write_scenario(tmp_path / "d", rows, "parquet")
    with pytest.raises(RecordingError, match="metrics.parquet.*not sorted by ts"):
        read_all(d, chunk_samples=size)


def test_bad_log_lines(tmp_path: Path) -> None:
    d = write_scenario(tmp_path / "d", scenario_rows(), "parquet", logs=LOGS[::-1])
    with pytest.raises(RecordingError, match="logs.jsonl:2: log lines are not sorted"):
        read_all(d)
    for line, why in (
        ("{not json", "needs ts and line"),
        (json.dumps({"ts": T0}), "needs ts and line"),
        (json.dumps({"ts": "inf", "line": "x"}), "finite ts"),
        (json.dumps({"ts": T0, "line": 3}), "string line"),
    ):
        (d / "logs.jsonl").write_text(json.dumps(LOGS[0]) + "\n\n" + line + "\n")
        with pytest.raises(RecordingError, match=f"logs.jsonl:3: .*{why}"):
            read_all(d)


def test_bad_labels_json(tmp_path: Path) -> None:
    d = write_scenario(tmp_path / "d", scenario_rows(), "csv")
    (d / "labels.json").write_text("{")
    with pytest.raises(RecordingError, match="labels.json: not valid JSON"):
        describe(d)


def test_store_needs_a_known_run(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    key = SeriesKey.of("train.loss", {"run": "r1"})
    with Store(path) as store:
        store.apply([SampleBatch("s", 1, [key], *_one_sample())])
    with pytest.raises(RecordingError, match="s.duckdb.*name one"):
        read_all(path)
    with pytest.raises(RecordingError, match="s.duckdb: no run 'r9'"):
        describe(path, run="r9")
    with Store(path), pytest.raises(StoreError, match="s.duckdb is already open"):
        read_all(path, run="r1")
    assert read_all(path, run="r1") == 1


def test_an_open_store_is_read_and_left_open(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    fill_store(path)
    with Store(path) as store:
        store.upsert_run(Run("r1", planned_total_steps=77))
        from_open = flatten(list(read_recorded(store, run="r1", chunk_samples=3)))
        info = describe(store, run="r1")
        with pytest.raises(RecordingError, match="s.duckdb: no run 'r9'"):
            read_all(store, run="r9")
        assert store.get_run("r1") is not None
    assert (info.samples, info.planned_total_steps) == (len(from_open), 77)
    same(from_open, flatten(list(read_recorded(path, run="r1", chunk_samples=3))))


def _one_sample() -> tuple[object, ...]:
    return (np.zeros(1, np.uint32), np.full(1, T0), np.zeros(1, np.int64), np.ones(1))


def test_chunk_size_must_be_positive(tmp_path: Path) -> None:
    d = write_scenario(tmp_path / "d", scenario_rows(), "parquet")
    with pytest.raises(ValueError, match="chunk_samples"):
        read_all(d, chunk_samples=0)


@pytest.mark.parametrize("until", [T0 + 3.0, T0 + 9.9, T0 + 100.0])
def test_until_stops_at_that_data_time(tmp_path: Path, until: float) -> None:
    d = write_scenario(tmp_path / "sc", scenario_rows(), "parquet")
    chunks = list(read_recorded(d, chunk_samples=7, until=until))
    events = check_chunks(chunks)
    whole = flatten(list(read_recorded(d, chunk_samples=7)))
    same(flatten(chunks), [row for row in whole if row[2] <= until])
    assert [e.ts for e in events] == [r["ts"] for r in LOGS if r["ts"] <= until]
    assert chunks[-1].end <= until
