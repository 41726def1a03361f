"""What retention costs the store: a pass that deletes, a pass with nothing due, the size read,
and a query over a stretch whose raw samples are gone.

Run: python bench/retention.py [--days 6] [--series 100] [--dir DIR]
Builds a store of ``--series`` host series sampled every 5 s over ``--days`` days (compacted),
then applies raw=2d,10s=3d,300s=5d: prints how long the pass took, how many transactions it
took and the longest of them (how long ingest may wait behind it), what a pass with nothing
due costs, what ``disk_bytes`` costs, and a downsample of a day before and after.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from stepwatch.model import NO_STEP, SampleBatch, SeriesKey
from stepwatch.store import Retention, Store

DAY = 86_400.0
EVERY_S = 5.0
POLICY = Retention.parse("raw=2d,10s=3d,300s=5d,events=2d")


def _fill(store: Store, days: float, series: int) -> int:
    keys = [SeriesKey.of("host.cpu_pct", {"node": f"n{i}"}) for i in range(series)]
    start, rng, n = time.time() - days * DAY, np.random.default_rng(0), 0
    per = max(1, 1_000_000 // series)  # about a million samples a batch
    for seq, lo in enumerate(range(0, int(days * DAY / EVERY_S), per)):
        t = start + EVERY_S * np.arange(lo, min(lo + per, int(days * DAY / EVERY_S)))
        ts = np.repeat(t, series)
        sid = np.tile(np.arange(series, dtype=np.uint32), t.size)
        value = rng.uniform(0, 100, ts.size)
        store.apply([SampleBatch("bench", seq, keys, sid, ts, np.full(ts.size, NO_STEP), value)])
        n += ts.size
    store.compact()
    return n


class _Chunks:
    """A ``stop`` callback that never stops: it notes when each chunk begins."""

    def __init__(self) -> None:
        self.marks = [time.perf_counter()]

    def __call__(self) -> bool:
        self.marks.append(time.perf_counter())
        return False

    def longest_ms(self) -> float:
        return 1e3 * float(np.max(np.diff(self.marks)))


def _query_ms(store: Store, start: float) -> float:
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        store.downsample(0, start, start + DAY, 288)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=float, default=6.0)
    parser.add_argument("--series", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, Store(Path(tmp) / "b.duckdb") as store:
        n = _fill(store, args.days, args.series)
        old = time.time() - (args.days - 0.5) * DAY
        before_ms, used = _query_ms(store, old), store.footprint.disk_bytes()
        chunks = _Chunks()
        done = store.retention.retain(POLICY, stop=chunks)
        chunks()  # the end of the last chunk
        spent = chunks.marks[-1] - chunks.marks[0]
        print(
            f"{n:,} samples over {args.days:g} days, {args.series} series; {POLICY}: deleted "
            f"{done.samples:,} samples, {done.tier_rows:,} tier rows in {spent:.2f} s, "
            f"{len(chunks.marks) - 2} chunks, the longest {chunks.longest_ms():.0f} ms"
        )
        idle = []
        for _ in range(5):
            t0 = time.perf_counter()
            store.retention.retain(POLICY)
            idle.append(time.perf_counter() - t0)
        print(f"a pass with nothing due: {1e3 * statistics.median(idle):.1f} ms (median of 5)")
        t0 = time.perf_counter()
        for _ in range(100):
            store.footprint.disk_bytes()
        print(
            f"disk_bytes: {1e3 * (time.perf_counter() - t0) / 100:.2f} ms; "
            f"{used / 2**20:.0f} MiB before, {store.footprint.disk_bytes() / 2**20:.0f} MiB after"
        )
        print(
            f"downsample of a day {args.days - 0.5:g} days back: {before_ms:.1f} ms from raw and "
            f"tiers, {_query_ms(store, old):.1f} ms from the 300 s tier alone"
        )


if __name__ == "__main__":
    main()
