"""Soak: many short runs one after another through one real collector, whose memory and
per-batch cost must stay flat however many runs it has seen.

Run: python bench/soak.py [--runs 1000 --series 6 --steps 100 --batches 4 --store-memory 64MiB]

Starts ``python -m stepwatch.server`` on a temporary store and a free loopback port (the
built-in rules running), then, for each run in turn: creates it, posts ``--steps`` steps of
``--series`` series in ``--batches`` SWB batches over one keep-alive connection, and finishes
it. After 10, 100 and every tenfold more runs (and the last) it prints the collector's RSS
(and how much of it DuckDB holds), the ingest latency (acknowledged, so committed) of the
batches since the previous report, the latency of finishing a run, how many runs detection
holds state of (-1: not told) and how many series the store's catalogue holds in memory, and
at the end how the last figures compare with those after 10 runs. Prints figures; never
passes or fails on time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil
from _collector import free_port, start_collector
from prometheus_client.parser import text_string_to_metric_families

from stepwatch.store import Store
from stepwatch.wire import BINARY_CONTENT_TYPE, encode

T0 = 1_780_000_000.0
NAMES = (
    "train.loss",
    "train.grad_norm",
    "train.lr",
    "train.step_time_s",
    "gpu.util_pct",
    "gpu.temp_c",
    "host.cpu_pct",
    "train.compute_time_s",
)


@dataclass
class Figures:
    """What one report prints: runs so far, the collector's RSS, batch and finish latencies."""

    runs: int
    rss_mib: float
    held: int = 0  # runs whose detection state the collector holds
    store_mib: float = 0.0  # what DuckDB holds of that RSS (its /metrics figure)
    resident: int = 0  # series the store's catalogue holds in memory
    batch_ms: list[float] = field(default_factory=list)
    finish_ms: list[float] = field(default_factory=list)

    def line(self) -> str:
        b, f = np.array(self.batch_ms), np.array(self.finish_ms)
        return (
            f"after {self.runs:>6,} runs: RSS {self.rss_mib:7.1f} MiB (DuckDB "
            f"{self.store_mib:5.1f})  batch p50 "
            f"{np.percentile(b, 50):6.2f} ms p95 {np.percentile(b, 95):6.2f} ms  "
            f"finish p50 {np.percentile(f, 50):6.2f} ms  detection holds {self.held} runs, "
            f"the catalogue {self.resident} series"
        )


class Client:
    """One keep-alive connection to the collector; each call answers or ends the bench."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self, path: str, body: bytes, content_type: str = "application/json") -> float:
        """POST and read the answer; the milliseconds it took."""
        began = time.perf_counter()
        self.conn.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = self.conn.getresponse()
        answer = response.read()
        if response.status != 200:
            raise SystemExit(f"POST {path}: HTTP {response.status}: {answer[:300]!r}")
        return (time.perf_counter() - began) * 1e3

    def get(self, path: str) -> bytes:
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        answer = response.read()
        if response.status != 200:
            raise SystemExit(f"GET {path}: HTTP {response.status}: {answer[:300]!r}")
        return answer

    def figure(self, name: str) -> float:
        """One unlabelled figure of the collector's /metrics."""
        for family in text_string_to_metric_families(self.get("/metrics").decode()):
            for sample in family.samples:
                if sample.name == name and not sample.labels:
                    return float(sample.value)
        raise SystemExit(f"/metrics has no {name}")


def _run(client: Client, i: int, args: argparse.Namespace, into: Figures) -> None:
    """Create run ``i``, send its steps, finish it."""
    run, start = f"soak-{i:06d}", T0 + i * args.steps
    doc = {"id": run, "project": "soak", "name": run, "start": start}
    client.post("/api/v1/runs", json.dumps(doc).encode())
    names = NAMES[: args.series]
    keys = [(n, {"run": run, "node": "n0", "rank": "0", "gpu": "0"}) for n in names]
    per = args.steps // args.batches
    rng = np.random.default_rng(i)
    for b in range(args.batches):
        step = np.repeat(np.arange(b * per, (b + 1) * per, dtype=np.int64), len(keys))
        series = np.tile(np.arange(len(keys), dtype=np.uint32), per)
        value = 2.0 + rng.normal(0.0, 0.01, step.shape[0])
        frame = encode(f"{run}/rank0", b + 1, keys, value, start + step.astype(float), step, series)
        into.batch_ms.append(client.post("/api/v1/ingest", frame, BINARY_CONTENT_TYPE))
    end = json.dumps({"status": "finished", "end": start + args.steps}).encode()
    into.finish_ms.append(client.post(f"/api/v1/runs/{run}/finish", end))


def _reports(total: int) -> list[int]:
    """10, 100, 1000, ... below ``total``, and ``total``."""
    marks, n = [], 10
    while n < total:
        marks.append(n)
        n *= 10
    return [*marks, total]


def _soak(args: argparse.Namespace, workdir: Path) -> list[Figures]:
    port = free_port()
    memory = ("--store-memory", args.store_memory) if args.store_memory else ()
    collector = start_collector(
        workdir / "store.duckdb", port, workdir / "collector.log", "--no-auth", *memory
    )
    proc, client = psutil.Process(collector.pid), Client(port)
    out: list[Figures] = []
    current = Figures(0, 0.0)
    try:
        for i in range(args.runs):
            _run(client, i, args, current)
            if i + 1 in _reports(args.runs):
                current.runs, current.rss_mib = i + 1, proc.memory_info().rss / 2**20
                current.held = json.loads(client.get("/api/v1/alerts/stats")).get("runs", -1)
                current.store_mib = client.figure("stepwatch_store_memory_bytes") / 2**20
                current.resident = int(client.figure("stepwatch_store_resident_series"))
                print(current.line(), flush=True)
                out.append(current)
                current = Figures(0, 0.0)
    finally:
        collector.send_signal(signal.SIGTERM)
        print(f"collector: exit code {collector.wait(timeout=300)} after SIGTERM")
    with Store(workdir / "store.duckdb") as store:
        stats = store.stats()
    print(
        f"store: {stats['runs']:,} runs, {stats['series']:,} series, {stats['samples']:,} samples"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--series", type=int, default=6, choices=range(1, len(NAMES) + 1))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument(
        "--store-memory", default=None, help="the collector's --store-memory (default: its own)"
    )
    args = parser.parse_args()
    samples = args.series * (args.steps // args.batches) * args.batches
    print(
        f"soak: {args.runs:,} runs one after another, each {samples} samples of "
        f"{args.series} series in {args.batches} batches, then finished; the store's "
        f"memory: {args.store_memory or 'the default'}"
    )
    with tempfile.TemporaryDirectory(prefix="stepwatch-soak-") as tmp:
        figures = _soak(args, Path(tmp))
    first, last = figures[0], figures[-1]
    ratio = np.median(last.batch_ms) / np.median(first.batch_ms)
    print(
        f"after {last.runs:,} vs {first.runs:,} runs: RSS {last.rss_mib - first.rss_mib:+.1f} "
        f"MiB, batch p50 x{ratio:.2f} (flat: near x1)"
    )


if __name__ == "__main__":
    main()
