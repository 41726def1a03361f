"""What forwarding samples to another store costs and carries: remote write to a real
Prometheus, and InfluxDB's line protocol.

Run: python bench/forward.py [--seconds 20 --rounds 2 --senders 4 --runs 50 --steps 100]

1. Encoding: a forwarder's requests of a batch of 100 series x 1,000 samples (what its thread
   does to each committed batch), remote write (protobuf and snappy) and line protocol; CPU
   samples/s, the median of 5.
2. End to end: concurrent sender processes post SWB batches of training metrics (loss, rate and
   step time of ``--runs`` running runs) to a real collector for ``--seconds``, once alone and
   once forwarding by remote write to Debian's Prometheus (its receiver on, started here on
   loopback, a fresh one each round), ``--rounds`` times each, ABBA; samples/s acknowledged
   both ways and their ratio; the collector process's CPU time per sample acknowledged
   (Prometheus runs on the same cores: the ratio of ingest rates counts its work too); and
   how fast the samples
   reached Prometheus: forwarded samples/s (from the start to when none waited), the
   seconds after ingest ended until none waited, and what was dropped.
Prints figures; never passes or fails on time.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from _collector import free_port, start_collector
from _senders import Load, post_training, register_runs, start_senders

from stepwatch.model import SampleBatch, SeriesKey
from stepwatch.tsdb import LINE_PROTOCOL, REMOTE_WRITE, Wire

STEP_S = 0.001


def encoding(repeat: int = 5) -> None:
    """Part 1: a batch through each wire's requests."""
    keys = [SeriesKey.of("train.loss", {"run": f"r{i % 10}", "rank": str(i)}) for i in range(100)]
    n = 100_000
    rng = np.random.default_rng(0)
    series = np.tile(np.arange(100, dtype=np.uint32), n // 100)
    ts, value = time.time() + np.arange(n) * 1e-3, rng.normal(2, 0.1, n)
    batch = SampleBatch("bench", 1, keys, series, ts, np.arange(n), value)
    print(f"== encoding a batch of {n:,} samples (100 series), CPU, median of {repeat}")
    wire: Wire
    for wire in (REMOTE_WRITE, LINE_PROTOCOL):
        took = []
        for _ in range(repeat):
            began = time.process_time()
            size = sum(len(body) for body, _ in wire.requests(batch, 10_000))
            took.append(time.process_time() - began)
        rate = n / statistics.median(took)
        print(
            f"{wire.name:<14} {rate:>12,.0f} samples/s   {size / n:5.1f} bytes a sample on the wire"
        )


def _prometheus(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    found = shutil.which("prometheus")
    if found is None:
        raise SystemExit("prometheus is not installed: run scripts/system-deps")
    home.mkdir()
    config, port = home / "prometheus.yml", free_port()
    config.write_text("global:\n  scrape_interval: 15s\n")
    args = [
        found,
        f"--config.file={config}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-remote-write-receiver",
    ]
    with (home / "prometheus.log").open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/-/ready")
            if conn.getresponse().status == 200:
                return proc, f"http://127.0.0.1:{port}/api/v1/write"
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit((home / "prometheus.log").read_text())


def _figures(port: int) -> dict[str, float]:
    """The collector's forwarding figures: sent, dropped, pending."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    out = {"sent": 0.0, "dropped": 0.0, "pending": 0.0}
    for line in text.splitlines():
        if line.startswith("stepwatch_forward_samples_total"):
            out["sent" if 'outcome="sent"' in line else "dropped"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("stepwatch_forward_pending_samples"):
            out["pending"] += float(line.rsplit(" ", 1)[1])
    return out


def _round(args: argparse.Namespace, home: Path, forward: bool) -> dict[str, float]:
    """One collector on a fresh store, alone or forwarding to a fresh Prometheus."""
    port, store = free_port(), home / "store.duckdb"
    prometheus, target = _prometheus(home / "prometheus") if forward else (None, None)
    extra = ("--remote-write", target) if target else ()
    collector = start_collector(store, port, home / "collector.log", "--no-auth",
                                "--forecast-interval", "0", *extra)  # fmt: skip
    t0 = time.time() - 1800.0  # Prometheus takes samples of the last hour or so
    register_runs(port, args.runs, t0, 10**9)
    load = Load(args.runs, args.senders, args.steps, args.seconds, t0, STEP_S)
    go, results, senders = start_senders(post_training, args.senders, port, load)
    time.sleep(0.5)
    start = time.monotonic()
    go.set()
    sent = [results.get() for _ in senders]
    for p in senders:
        p.join()
    end = max(s.end for s in sent)
    out = {"ingest": sum(s.samples for s in sent) / (end - start)}
    if target:
        while (now := _figures(port))["pending"] > 0 and time.monotonic() - end < 300:
            time.sleep(0.2)
        drained = time.monotonic()
        out |= {"forwarded": now["sent"] / (drained - start), "drain_s": drained - end,
                "dropped": now["dropped"]}  # fmt: skip
    used = psutil.Process(collector.pid).cpu_times()
    out["cpu_us_per_sample"] = 1e6 * (used.user + used.system) / sum(s.samples for s in sent)
    collector.send_signal(signal.SIGTERM)
    collector.wait(timeout=300)
    if prometheus is not None:
        prometheus.send_signal(signal.SIGTERM)
        prometheus.wait(timeout=60)
    return out


def end_to_end(args: argparse.Namespace, workdir: Path) -> None:
    """Part 2: ingest alone and forwarding to Prometheus, ABBA."""
    print(f"== ingest: {args.senders} senders, {args.runs} running runs x 3 training series, "
          f"{args.steps} steps a batch, {args.seconds:g} s a collector")  # fmt: skip
    prometheus, target = _prometheus(workdir / "prometheus")
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    try:
        for i in range(args.rounds):
            for on in (False, True) if i % 2 == 0 else (True, False):
                home = workdir / f"round{i}-{'on' if on else 'off'}"
                home.mkdir()
                got = _round(args, home, target if on else None)
                runs[on].append(got)
                shown = (f"{k} {v:,.0f}" if v > 100 else f"{k} {v:,.2f}" for k, v in got.items())
                print(f"  {'forwarding' if on else 'alone':<10} " + ", ".join(shown))
    finally:
        prometheus.send_signal(signal.SIGTERM)
        prometheus.wait(timeout=60)
    off = statistics.median(r["ingest"] for r in runs[False])
    on = statistics.median(r["ingest"] for r in runs[True])
    forwarded = statistics.median(r["forwarded"] for r in runs[True])
    cpu_off, cpu_on = (
        statistics.median(r["cpu_us_per_sample"] for r in runs[x]) for x in (False, True)
    )
    print(f"median of {args.rounds}: ingest alone {off:,.0f} samples/s, forwarding {on:,.0f} "
          f"samples/s ({on / off:.1%}); forwarded {forwarded:,.0f} samples/s; the collector's "
          f"CPU {cpu_off:.2f} µs a sample alone, {cpu_on:.2f} forwarding")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--steps", type=int, default=100, help="steps of each run a batch")
    args = parser.parse_args()
    encoding()
    with tempfile.TemporaryDirectory(prefix="stepwatch-bench-") as tmp:
        end_to_end(args, Path(tmp))


if __name__ == "__main__":
    main()
