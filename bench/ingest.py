"""Sustained ingest: concurrent sender processes POST SWB batches to the real collector over HTTP,
with auth off and with auth on (each batch sent with an ingest token), side by side.

Run: python bench/ingest.py [--seconds 10 --senders 4 --batch 20000 --series 64 --rounds 1]

Starts ``python -m stepwatch.server`` on a temporary store and a free loopback
port; each sender process keeps one keep-alive connection and posts batches
back to back (each the next seq of its own source) until the time is up, then
the collector is stopped gracefully and the store's sample count is checked
against the samples acknowledged. Then the same again on a fresh store with
``--auth`` and a token of role ingest made on it beforehand, ``--rounds`` times
each (alternating, so that a machine busier at one moment weighs on both), and
the median throughputs are compared: auth should keep at least 95% of it.
Prints figures; never passes or fails on time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
from _collector import free_port, start_collector
from _senders import start_senders

from stepwatch.auth import ALL_PROJECTS, Role, TokenBook
from stepwatch.store import Store
from stepwatch.wire import BINARY_CONTENT_TYPE, encode

T0 = 1_780_000_000.0


@dataclass
class Sent:
    """What one sender got acknowledged, and when it stopped."""

    samples: int
    batches: int
    duplicates: int
    end: float
    latencies_s: list[float]


def _sender(
    index: int,
    port: int,
    token: str | None,
    args: argparse.Namespace,
    go: mp.Event,
    results: mp.Queue,
) -> None:
    """Post batches of ``args.batch`` samples over ``args.series`` series until time is up."""
    n, k = args.batch, args.series
    keys = [
        ("bench.value", {"run": "bench", "node": f"node{index}", "rank": str(index * k + j)})
        for j in range(k)
    ]
    series = (np.arange(n) % k).astype(np.uint32)
    offsets = (np.arange(n) // k).astype(np.float64) * 0.001
    value = np.random.default_rng(index).normal(size=n)
    step = (np.arange(n) // k).astype(np.int64)
    span = offsets[-1] + 0.001
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": BINARY_CONTENT_TYPE}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    sent = Sent(0, 0, 0, 0.0, [])
    go.wait()
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline and sent.batches < args.max_batches:
        seq = sent.batches + 1
        frame = encode(f"sender{index}", seq, keys, value, T0 + seq * span + offsets, step, series)
        began = time.perf_counter()
        conn.request("POST", "/api/v1/ingest", body=frame, headers=headers)
        response = conn.getresponse()
        body = response.read()
        sent.latencies_s.append(time.perf_counter() - began)
        if response.status != 200:
            raise SystemExit(f"sender {index}: HTTP {response.status}: {body[:200]!r}")
        if json.loads(body)["applied"]:
            sent.samples += n
        else:
            sent.duplicates += 1
        sent.batches = seq
    sent.end = time.monotonic()
    conn.close()
    results.put(sent)


def _ingest_token(store: Path) -> str:
    """A token of role ingest on every project, made on the store before the collector opens it."""
    with Store(store) as opened:
        return TokenBook(opened).create(Role.INGEST, [ALL_PROJECTS], name="bench")[1]


@dataclass
class Rate:
    """One run's throughput, and the collector CPU it cost (steadier on a busy machine)."""

    samples_per_s: float
    cpu_s_per_m: float  # collector CPU seconds per million samples


def _run(args: argparse.Namespace, workdir: Path, auth: bool) -> Rate:
    """One collector on a fresh store, with or without auth."""
    print(f"== auth {'on (--auth, an ingest token)' if auth else 'off'}")
    port = free_port()
    store = workdir / "store.duckdb"
    token = _ingest_token(store) if auth else None
    extra = ("--auth",) if auth else ("--no-auth",)
    collector = start_collector(store, port, workdir / "collector.log", *extra)
    server_cpu = psutil.Process(collector.pid)
    go, results, senders = start_senders(_sender, args.senders, port, token, args)
    time.sleep(0.5)  # let the senders build their columns before the clock starts
    cpu_before = sum(server_cpu.cpu_times()[:2])
    machine_before = psutil.cpu_times()
    start = time.monotonic()
    go.set()
    sent = [results.get() for _ in senders]
    cpu_used = sum(server_cpu.cpu_times()[:2]) - cpu_before
    machine_after = psutil.cpu_times()
    idle_s = machine_after.idle - machine_before.idle
    for p in senders:
        p.join()
    collector.send_signal(signal.SIGTERM)
    exit_code = collector.wait(timeout=300)
    with Store(store) as opened:
        stored = opened.stats()["samples"]
    time_s = max(s.end for s in sent) - start
    _report(args, sent, time_s, cpu_used)
    busy = 1 - idle_s / (time_s * (os.cpu_count() or 1))
    print(f"machine:   {busy:.0%} of all CPUs busy (collector + senders)")
    acked = sum(s.samples for s in sent)
    print(f"stored:    {stored:,} samples in the store; acknowledged {acked:,} ", end="")
    print("(match)" if stored == acked else "(MISMATCH)")
    print(f"collector: exit code {exit_code} after SIGTERM")
    return Rate(acked / time_s, cpu_used / max(acked, 1) * 1e6)


def _report(args: argparse.Namespace, sent: list[Sent], time_s: float, cpu_s: float) -> None:
    acked = sum(s.samples for s in sent)
    batches = sum(s.batches for s in sent)
    lat = np.array([x for s in sent for x in s.latencies_s]) * 1e3
    mb = batches * (args.batch * 28) / 1e6
    print(
        f"ingest: {args.senders} senders x {args.batch:,}-sample batches over {args.series} "
        f"series each, {time_s:.1f} s, {os.cpu_count()} CPUs"
    )
    print(f"sustained: {acked / time_s:,.0f} samples/s acknowledged ({mb / time_s:,.1f} MB/s)")
    print(f"batches:   {batches:,} ({sum(s.duplicates for s in sent)} duplicates)")
    print(f"ack latency: p50 {np.percentile(lat, 50):.1f} ms, p99 {np.percentile(lat, 99):.1f} ms")
    print(f"collector CPU: {cpu_s / time_s:.2f} cores busy on average")


def _compare(rates: dict[bool, list[Rate]], rounds: int) -> None:
    """Auth off and on side by side: medians of throughput and of collector CPU per sample."""
    print(f"== median of {rounds} run(s) each  {'auth off':>10} {'auth on':>10} {'on/off':>8}")
    rows = (
        ("throughput, samples/s", lambda r: r.samples_per_s, ",.0f"),
        ("collector CPU s per M samples", lambda r: r.cpu_s_per_m, ".2f"),
    )
    for label, of, spec in rows:
        off, on = (float(np.median([of(r) for r in rates[auth]])) for auth in (False, True))
        print(f"{label:<30}{off:>10{spec}} {on:>10{spec}} {on / off:>8.1%}")
    print("target: with auth on, at least 95% of the throughput with auth off")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--series", type=int, default=64)
    parser.add_argument("--max-batches", type=int, default=10_000, help="per sender")
    parser.add_argument("--rounds", type=int, default=1, help="runs with auth off and on, each")
    args = parser.parse_args()
    rates: dict[bool, list[Rate]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="stepwatch-bench-") as tmp:
        for i in range(args.rounds):
            for auth in (False, True) if i % 2 == 0 else (True, False):  # ABBA: no order bias
                home = Path(tmp) / f"{i}-{'auth' if auth else 'open'}"
                home.mkdir()
                rates[auth].append(_run(args, home, auth))
    _compare(rates, args.rounds)


if __name__ == "__main__":
    main()
