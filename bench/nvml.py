"""What one GPU read costs through NVML: fast reads and reads with the slow queries, p50/p99.

Run on a machine with a GPU:  python bench/nvml.py [--seconds 30 --interval 1 --slow-interval 10]
Anywhere (simulated GPUs):     python bench/nvml.py --fake 8 [--script gpus.json]

Opens NVML through open_gpu("nvml") (or the fake NVML), reads every --interval
seconds for --seconds, then prints the cost of opening and closing the source,
the latency of fast reads and of slow reads (PCIe throughput, NVLink), the
metrics of the first read and every event seen. Prints figures; never passes or
fails on time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from stepwatch.collect import GpuSource, GpuUnavailable, Reading, open_gpu


def _latency(label: str, seconds: list[float]) -> str:
    if not seconds:
        return f"{label}: no reads"
    ms = np.asarray(seconds) * 1000
    p50, p99 = np.percentile(ms, [50, 99])
    return f"{label}: {len(ms):4d}   p50 {p50:8.3f} ms   p99 {p99:8.3f} ms   max {ms.max():8.3f} ms"


def _run(
    source: GpuSource, seconds: float, interval: float
) -> tuple[list[Reading], list[float], list[float]]:
    """Read on schedule for ``seconds``: every reading, and the fast and slow read latencies."""
    readings: list[Reading] = []
    fast: list[float] = []
    slow: list[float] = []
    start = due = time.monotonic()
    while not readings or due < start + seconds:
        time.sleep(max(0.0, due - time.monotonic()))
        before = source.slow_reads
        t0 = time.perf_counter()
        readings.append(source.read(time.time()))
        (slow if source.slow_reads != before else fast).append(time.perf_counter() - t0)
        due += interval
    return readings, fast, slow


def _print_reading(first: Reading) -> None:
    print("first read:")
    for sample in sorted(first.samples, key=lambda s: (int(s.labels["gpu"]), s.name)):
        value = f"{sample.value:,.0f}" if sample.value.is_integer() else f"{sample.value:,.3f}"
        print(f"  gpu {sample.labels['gpu']:>2}  {sample.name:<28} {value:>22}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--slow-interval", type=float, default=10.0)
    parser.add_argument("--fake", type=int, metavar="N", help="simulate N GPUs instead of NVML")
    parser.add_argument("--script", type=Path, help="JSON overrides for the fake GPUs")
    args = parser.parse_args()
    spec = f"fake:{args.fake}" if args.fake else "nvml"
    t0 = time.perf_counter()
    try:
        source, line = open_gpu(
            spec, args.script, interval_s=args.interval, slow_interval_s=args.slow_interval
        )
    except GpuUnavailable as err:
        raise SystemExit(f"{err.reason} (try --fake N)") from None
    assert source is not None
    opened = time.perf_counter() - t0
    readings, fast, slow = _run(source, args.seconds, args.interval)
    t0 = time.perf_counter()
    source.close()
    closed = time.perf_counter() - t0
    print(line)
    print(f"open (nvmlInit, handles, XID thread): {opened * 1000:.1f} ms")
    print(f"close (join XID thread, nvmlShutdown): {closed * 1000:.1f} ms")
    print(_latency("fast reads", fast))
    print(_latency("slow reads", slow))
    _print_reading(readings[0])
    events = [e for r in readings for e in r.events]
    print(f"events: {len(events)}")
    for event in events:
        print(f"  {event.kind:<14} {event.text}")


if __name__ == "__main__":
    main()
