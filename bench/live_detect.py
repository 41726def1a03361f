"""Live detection latency: how soon after a batch with a NaN loss is acknowledged the alert can be
read from the collector, while realistic training and GPU data stream in at ~100k samples/s.

Run: python bench/live_detect.py [--seconds 40 --senders 4 --nodes 8 --hz 40 --faults 20]

Starts ``python -m stepwatch.server`` (built-in rule pack) on a temporary store
and a free port. Each sender process plays ``--nodes`` nodes of 8 GPUs
(training metrics per rank, GPU metrics per GPU, host metrics per node), one
SWB batch every 100 ms over one keep-alive connection, with data time = wall
time. Sender 0 puts a NaN into rank 0's loss at known moments; the
delay measured is from the moment that batch's POST was acknowledged to the
moment its alert arrived on ``/api/v1/alerts/stream`` (and, separately, to the
first ``GET /api/v1/alerts`` that lists it). Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import multiprocessing as mp
import os
import queue
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _collector import free_port, start_collector
from _node_metrics import GPU, GPUS, HOST, LEVEL, RUN, TRAIN
from _senders import start_senders

from stepwatch.wire import BINARY_CONTENT_TYPE, encode

TICK_S = 0.1


@dataclass
class Sent:
    """What one sender got acknowledged, and the faults it injected: (since, acked at)."""

    samples: int = 0
    batches: int = 0
    behind: int = 0  # ticks that started late: the collector could not keep the pace
    faults: list[tuple[float, float]] = field(default_factory=list)


def _keys(index: int, nodes: int) -> list[tuple[str, dict[str, str]]]:
    keys = []
    for n in range(nodes):
        node = f"node{index * nodes + n}"
        for g in range(GPUS):
            rank = str((index * nodes + n) * GPUS + g)
            metrics = RUN + TRAIN if rank == "0" else TRAIN
            keys += [(m, {"run": "bench", "node": node, "rank": rank}) for m in metrics]
            keys += [(m, {"run": "bench", "node": node, "gpu": str(g)}) for m in GPU]
        keys += [(m, {"run": "bench", "node": node}) for m in HOST]
    return keys


def _sender(index: int, port: int, args: argparse.Namespace, go: mp.Event, out: mp.Queue) -> None:
    """Post one batch per tick until time is up; sender 0 injects the NaN losses."""
    keys = _keys(index, args.nodes)
    per_tick = max(1, round(args.hz * TICK_S))
    k = len(keys)
    series = np.tile(np.arange(k, dtype=np.uint32), per_tick)
    level = np.array([LEVEL[name][0] for name, _ in keys])
    noise = np.array([LEVEL[name][1] for name, _ in keys])
    is_train = np.array([name.startswith("train.") for name, _ in keys])
    loss = [i for i, (name, _) in enumerate(keys) if name == "train.loss"]
    rng = np.random.default_rng(index)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": BINARY_CONTENT_TYPE}
    sent = Sent()
    go.wait()
    start = time.time()
    fault_at = [start + args.warmup + i * (args.seconds - args.warmup - 2) / args.faults
                for i in range(args.faults)] if index == 0 else []  # fmt: skip
    tick = start
    while tick < start + args.seconds:
        now = time.time()
        if now < tick:
            time.sleep(tick - now)
        elif now - tick > TICK_S:
            sent.behind += 1
        offsets = np.repeat(np.arange(per_tick) / per_tick * TICK_S, k)
        ts = tick + offsets
        value = np.tile(level, per_tick) + rng.normal(size=k * per_tick) * np.tile(noise, per_tick)
        step = np.where(np.tile(is_train, per_tick), int(tick / 0.5), -1).astype(np.int64)
        since = None
        if fault_at and tick >= fault_at[0]:
            fault_at.pop(0)
            row = int(rng.choice(loss))  # one rank's loss, first sample of the tick
            value[row] = math.nan
            since = float(ts[row])
        frame = encode(f"sender{index}", sent.batches + 1, keys, value, ts, step, series)
        conn.request("POST", "/api/v1/ingest", body=frame, headers=headers)
        response = conn.getresponse()
        body = response.read()
        acked = time.time()
        if response.status != 200:
            raise SystemExit(f"sender {index}: HTTP {response.status}: {body[:200]!r}")
        sent.batches += 1
        sent.samples += len(value)
        if since is not None:
            sent.faults.append((since, acked))
        tick += TICK_S
    conn.close()
    out.put(sent)


class Listener:
    """Reads ``/api/v1/alerts/stream`` on a thread: when each nonfinite alert began firing."""

    def __init__(self, port: int) -> None:
        self.seen: dict[float, float] = {}
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self._conn.request("GET", "/api/v1/alerts/stream")
        self._response = self._conn.getresponse()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        kind = None
        try:
            for raw in self._response:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "alert":
                    alert = json.loads(line[6:])
                    if alert["kind"] == "nonfinite" and alert["state"] == "firing":
                        self.seen.setdefault(float(alert["since"]), time.time())
        except (OSError, ValueError, http.client.HTTPException):
            pass  # the stream ends when the collector stops

    def close(self) -> None:
        self._thread.join(30)
        self._conn.close()


def _poll(port: int, seen: dict[float, float], stop: threading.Event, every_s: float) -> None:
    """When each nonfinite alert was first listed by ``GET /api/v1/alerts?state=all``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while not stop.wait(every_s):
        conn.request("GET", "/api/v1/alerts?state=all&kind=nonfinite&limit=10000")
        listed = json.loads(conn.getresponse().read())
        now = time.time()
        for alert in listed:
            seen.setdefault(float(alert["since"]), now)
    conn.close()


def _percentiles(name: str, delays_s: list[float]) -> None:
    if not delays_s:
        print(f"{name}: no alert seen")
        return
    ms = np.array(delays_s) * 1e3
    print(
        f"{name}: {len(ms)} alerts, p50 {np.percentile(ms, 50):.0f} ms, "
        f"p99 {np.percentile(ms, 99):.0f} ms, max {ms.max():.0f} ms"
    )


def _run(args: argparse.Namespace, workdir: Path) -> None:
    port = free_port()
    collector = start_collector(workdir / "store.duckdb", port, workdir / "collector.log")
    listener = Listener(port)
    go, out, senders = start_senders(_sender, args.senders, port, args)
    polled: dict[float, float] = {}
    stop_polling = threading.Event()
    poller = threading.Thread(target=_poll, args=(port, polled, stop_polling, args.poll_s))
    time.sleep(0.5)
    begin = time.time()
    go.set()
    poller.start()
    results: list[Sent] = []
    while len(results) < len(senders):
        try:
            results.append(out.get(timeout=args.seconds + 120))
        except queue.Empty:
            raise SystemExit("a sender did not report back") from None
    elapsed = time.time() - begin
    for p in senders:
        p.join()
    time.sleep(3.0)  # the last fault's alert may still be on its way
    stop_polling.set()
    poller.join()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/api/v1/alerts/stats")
    stats = json.loads(conn.getresponse().read())
    conn.close()
    collector.send_signal(signal.SIGTERM)
    code = collector.wait(timeout=300)
    listener.close()
    faults = [f for s in results for f in s.faults]
    _report(args, results, elapsed, faults, listener.seen, polled, code)
    print(
        f"detection: {stats['samples']:,} samples seen, {stats['queued']:,} still queued, "
        f"{stats['dropped']:,} skipped, {stats['late']:,} raised in time, {stats['errors']} errors"
    )


def _report(
    args: argparse.Namespace,
    results: list[Sent],
    elapsed: float,
    faults: list[tuple[float, float]],
    streamed: dict[float, float],
    polled: dict[float, float],
    code: int,
) -> None:
    samples = sum(s.samples for s in results)
    series = len(_keys(0, args.nodes)) * args.senders
    print(
        f"live detection: {args.senders} senders x {args.nodes} nodes x {GPUS} GPUs "
        f"({series:,} series), a batch per {TICK_S * 1e3:.0f} ms each, {elapsed:.1f} s, "
        f"{os.cpu_count()} CPUs"
    )
    print(f"ingest: {samples / elapsed:,.0f} samples/s acknowledged "
          f"({sum(s.batches for s in results):,} batches, "
          f"{sum(s.behind for s in results)} ticks late)")  # fmt: skip
    print(f"faults: {len(faults)} NaN losses injected")
    _percentiles(
        "ack -> alert on the SSE stream", [streamed[s] - a for s, a in faults if s in streamed]
    )  # noqa: E501
    label = f"ack -> listed by GET /api/v1/alerts (polled every {args.poll_s * 1e3:.0f} ms)"
    _percentiles(label, [polled[s] - a for s, a in faults if s in polled])
    missed = [s for s, _ in faults if s not in streamed]
    print(f"missed on the stream: {len(missed)}; collector exit code {code} after SIGTERM")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before the first fault")
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=8, help="nodes per sender (8 GPUs each)")
    parser.add_argument("--hz", type=float, default=40.0, help="samples per series per second")
    parser.add_argument("--poll-s", type=float, default=0.1, help="GET /api/v1/alerts interval")
    parser.add_argument("--faults", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepwatch-bench-") as tmp:
        _run(args, Path(tmp))


if __name__ == "__main__":
    main()
