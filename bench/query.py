"""Query speed of the store on big series: a downsampled view and cross-rank percentiles.

Run: python bench/query.py [--quick] [--dir DIR]
Builds, through Store.apply in batches of about 1M samples (automatic
compaction included), one 10M-sample series and train.step_time_s of 64 ranks
over 1M steps (64M samples) in a temporary DuckDB file, then times each query
several times and prints the median and the best. --quick builds a tenth of that.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from stepwatch.model import SampleBatch, SeriesKey
from stepwatch.store import Store

T0 = 1_780_000_000.0
RANKS = 64
BATCH = 1_000_000


def _single_series(n: int, rng: np.random.Generator) -> Iterator[SampleBatch]:
    """One loss curve, a sample every ~0.5 s."""
    key = [SeriesKey.of("train.loss", {"run": "bench-a", "rank": 0})]
    for seq, lo in enumerate(range(0, n, BATCH)):
        step = np.arange(lo, min(n, lo + BATCH), dtype=np.int64)
        ts = T0 + step * 0.5 + rng.uniform(0, 0.1, step.shape[0])
        value = 2.0 * np.exp(-step / 3e6) + rng.normal(0, 0.05, step.shape[0])
        series = np.zeros(step.shape[0], np.uint32)
        yield SampleBatch("bench-a", seq, key, series, ts, step, value)


def _step_times(steps: int, rng: np.random.Generator) -> Iterator[SampleBatch]:
    """Step time of every rank at every step (~1 s); one straggler rank, occasional eval pauses."""
    keys = [
        SeriesKey.of("train.step_time_s", {"run": "bench-b", "rank": r, "node": f"node{r // 8}"})
        for r in range(RANKS)
    ]
    per = BATCH // RANKS
    for seq, lo in enumerate(range(0, steps, per)):
        step = np.repeat(np.arange(lo, min(steps, lo + per), dtype=np.int64), RANKS)
        rank = np.tile(np.arange(RANKS, dtype=np.uint32), step.shape[0] // RANKS)
        value = rng.lognormal(np.log(0.9), 0.05, step.shape[0]) * np.where(rank == 17, 1.3, 1.0)
        value[step % 5000 == 0] *= 40.0
        ts = T0 + step * 1.0 + rng.uniform(0, 0.05, step.shape[0])
        yield SampleBatch("bench-b", seq, keys, rank, ts, step, value)


def _ingest(store: Store, batches: Iterator[SampleBatch]) -> tuple[int, float]:
    """Apply every batch; samples stored and seconds spent in the store (generation excluded)."""
    n, spent = 0, 0.0
    for b in batches:
        t0 = time.perf_counter()
        store.apply([b])
        spent += time.perf_counter() - t0
        n += len(b)
    t0 = time.perf_counter()
    store.compact()
    return n, spent + time.perf_counter() - t0


def _timed(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    """Median and best wall time in ms, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), result


def _report(label: str, fn: Callable[[], object], target: str, repeat: int) -> None:
    median, best, result = _timed(fn, repeat)
    size = result["ts"].shape[0] if isinstance(result, dict) else len(result)  # type: ignore[arg-type]
    print(f"{label}: {median:.1f} ms median, {best:.1f} ms best, {size} rows{target}")


def _queries(store: Store, single_n: int, steps: int, repeat: int) -> None:
    (loss,) = store.series("train.loss")
    span = single_n * 0.5
    m = f"{single_n / 1e6:g}M"
    _report(
        f"downsample {m}→2000",
        lambda: store.downsample(loss.id, T0, T0 + span, 2000),
        " (target ≤ 50)",
        repeat,
    )
    zoom = (T0 + span * 0.4, T0 + span * 0.41)
    _report(
        f"downsample {m}, 1% zoom→2000", lambda: store.downsample(loss.id, *zoom, 2000), "", repeat
    )
    match = {"run": "bench-b"}
    total = f"{steps * RANKS / 1e6:g}M"

    def pct(by: str | None = None) -> object:
        (first, *_) = store.percentiles("train.step_time_s", match, T0, T0 + steps, 2000, by=by)
        return first

    _report(f"percentiles {total}", pct, " (target ≤ 300)", repeat)
    _report(f"percentiles {total} by node (first of 8)", lambda: pct("node"), "", repeat)
    _report(
        f"latest of {RANKS} series", lambda: store.latest("train.step_time_s", match), "", repeat
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the data")
    parser.add_argument("--dir", type=Path, default=None, help="where the temporary file goes")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    single_n, steps = (1_000_000, 100_000) if args.quick else (10_000_000, 1_000_000)
    rng = np.random.default_rng(0)
    with (
        tempfile.TemporaryDirectory(dir=args.dir) as tmp,
        Store(Path(tmp) / "bench.duckdb") as store,
    ):
        for name, batches in (
            (f"{single_n / 1e6:g}M-sample series", _single_series(single_n, rng)),
            (f"{RANKS} ranks x {steps / 1e6:g}M steps", _step_times(steps, rng)),
        ):
            n, spent = _ingest(store, batches)
            print(
                f"ingest {name}: {n / 1e6:.1f}M samples in {spent:.1f} s = "
                f"{n / spent / 1e6:.2f}M samples/s (apply + compaction)"
            )
        stats = store.stats()
        print(
            f"store: {stats['samples'] / 1e6:.1f}M samples, {stats['file_bytes'] / 2**20:.0f} MiB"
        )
        _queries(store, single_n, steps, args.repeat)


if __name__ == "__main__":
    main()
