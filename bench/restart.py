"""A collector killed (-9) under load with alerts firing, restarted at once: how long until it is
ready again, and whether anything was lost or told twice.

Run: python bench/restart.py [--senders 4 --rate 100000 --before 20 --after 15
                              --checkpoint-interval 5]

Starts ``python -m stepwatch.server`` on a temporary store with a rule that
fires for every sender's hot GPU and a webhook receiver (a thread of this
process) for its notifications. Sender processes post SWB batches at ``--rate``
samples/s in all, each batch sent again (same seq) until acknowledged. After
``--before`` seconds the collector is killed with SIGKILL and started again on
the same store while the senders go on; ``--after`` seconds later they stop
and the collector is stopped gracefully. Then the store is read back:

- time to ready: from the restart until ``/readyz`` answers 200 (the process
  starting, the store opening, detection restored and the data since the last
  checkpoint replayed), beside that of a start on an empty store;
- samples lost: what the senders had acknowledged and the store lacks (and
  what it holds beyond that, never acknowledged: 0, as every batch is re-sent until it is);
- alerts duplicated: alerts recorded firing more than once, or resolved, for
  an entity whose GPU never cooled; notifications duplicated: webhook calls
  beyond one per alert.

Prints figures; never passes or fails on time.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import multiprocessing as mp
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _collector import free_port, start_collector
from _senders import start_senders

from stepwatch.store import Store
from stepwatch.wire import BINARY_CONTENT_TYPE, encode

T0 = 1_780_000_000.0
SERIES = 50  # per sender: one GPU temperature, the rest other telemetry
RULES = """\
groups:
  - name: bench
    rules:
      - alert: hot
        kind: gpu_hot
        signal: {metric: gpu.temp_c, by: [run, node]}
        threshold: "> 80"
        for: 5 samples
"""


@dataclass
class Sent:
    """What one sender had acknowledged: samples stored (first sends and re-sends alike)."""

    samples: int
    batches: int
    retries: int


def _frames(index: int, batch: int) -> tuple[list[tuple[str, dict[str, str]]], np.ndarray]:
    node = {"run": "bench", "node": f"node{index}"}
    keys = [("gpu.temp_c", node)] + [
        ("bench.value", {**node, "rank": str(j)}) for j in range(SERIES - 1)
    ]
    return keys, (np.arange(batch) % SERIES).astype(np.uint32)


def _post(conn: http.client.HTTPConnection, frame: bytes) -> bool:
    """True once the collector acknowledged the batch (applied now or before)."""
    conn.request(
        "POST", "/api/v1/ingest", body=frame, headers={"Content-Type": BINARY_CONTENT_TYPE}
    )
    response = conn.getresponse()
    response.read()
    return response.status == 200


def _sender(
    index: int, port: int, args: argparse.Namespace, go: mp.Event, results: mp.Queue
) -> None:
    """Batches at this sender's share of the rate, each re-sent until acknowledged (the last
    one too, after the time is up: what was sent is then exactly what was acknowledged)."""
    n = args.batch
    keys, series = _frames(index, n)
    per_s = args.rate / args.senders
    interval = n / per_s
    rows = np.arange(n) // SERIES
    value = np.where(series == 0, 90.0, np.random.default_rng(index).normal(size=n))
    sent = Sent(0, 0, 0)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    go.wait()
    start = time.monotonic()
    deadline = start + args.before + args.after
    unanswered = False
    while time.monotonic() < deadline or unanswered:
        seq = sent.batches + 1
        ts = T0 + seq * interval + rows * interval / (n // SERIES)
        frame = encode(f"sender{index}", seq, keys, value, ts, rows + seq * n, series)
        try:
            acked = _post(conn, frame)
        except OSError:
            conn.close()
            acked = False
        unanswered = not acked
        if not acked:
            sent.retries += 1
            time.sleep(0.05)
            continue
        sent.samples += n
        sent.batches = seq
        time.sleep(max(0.0, start + seq * interval - time.monotonic()))
    conn.close()
    results.put(sent)


class _Hook(http.server.BaseHTTPRequestHandler):
    """Counts the webhook calls naming each alert id."""

    told: Counter[str] = Counter()

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        for alert_id in _Hook.ids_in(body):
            _Hook.told[alert_id] += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    @staticmethod
    def ids_in(body: str) -> set[str]:
        """The ids of the firing alerts a message names, wherever it puts them."""
        found: set[str] = set()

        def walk(node: object) -> None:
            if isinstance(node, dict):
                if isinstance(node.get("id"), str) and node.get("state") == "firing":
                    found.add(node["id"])
                for child in node.values():
                    walk(child)
            elif isinstance(node, list):
                for child in node:
                    walk(child)

        walk(json.loads(body))
        return found

    def log_message(self, format: str, *args: object) -> None:
        pass


def _alerts(store: Path) -> tuple[Counter[str], Counter[str], int]:
    """Firing and resolved transitions per alert id, and the samples stored."""
    with Store(store) as opened:
        records = opened.records(kind="alert", limit=1_000_000)
        samples = opened.stats()["samples"]
    firing = Counter(e.data["id"] for e in records if e.data.get("state") == "firing")
    resolved = Counter(e.data["id"] for e in records if e.data.get("state") == "resolved")
    return firing, resolved, samples


def _replay_size(store: Path) -> tuple[int, bool]:
    """Samples the restart replays (the store's position past the checkpoint's), and whether
    there is a checkpoint; read while the collector is down."""
    with Store(store) as opened:
        checkpoint = opened.load_checkpoint()
        now = opened.position()
    start = checkpoint.position.rid if checkpoint else now.rid
    return now.rid - start, checkpoint is not None


def _cold_start_s(home: Path) -> float:
    """Seconds a collector takes to be ready on an empty store: what any start costs."""
    began = time.monotonic()
    collector = start_collector(home / "empty.duckdb", free_port(), home / "empty.log")
    took = time.monotonic() - began
    collector.send_signal(signal.SIGTERM)
    collector.wait(timeout=60)
    return took


@dataclass
class Restart:
    """What the kill and the restart measured."""

    empty_s: float  # ready on an empty store
    ready_s: float  # ready after the restart
    down_s: float  # from the kill until ready
    replayed: int
    had_checkpoint: bool


def _collector_args(home: Path, hook_url: str, args: argparse.Namespace) -> tuple[str, ...]:
    """The rule file, a notifications file sending each alert to the hook on its own (so that
    a second message about one is a duplicate), and the checkpoint interval."""
    rules, notify = home / "rules.yaml", home / "notify.yaml"
    rules.write_text(RULES)
    notify.write_text(
        f"receivers:\n  - {{name: hook, type: webhook, url: '{hook_url}'}}\n"
        "route:\n  receiver: hook\n  group_wait: 0s\n  group_by: [kind, run, node]\n"
    )
    return ("--rules", str(rules), "--notify", str(notify),
            "--checkpoint-interval", str(args.checkpoint_interval))  # fmt: skip


def _kill_and_restart(
    args: argparse.Namespace, home: Path, port: int, extra: tuple[str, ...], go: mp.Event
) -> tuple[subprocess.Popen[bytes], Restart]:
    """Start, let the senders go, kill -9 ``--before`` seconds later, start again: the new
    process and what the restart measured."""
    store = home / "store.duckdb"
    empty_s = _cold_start_s(home)
    collector = start_collector(store, port, home / "collector.log", *extra)
    go.set()
    time.sleep(args.before)
    collector.send_signal(signal.SIGKILL)
    collector.wait()
    killed = time.monotonic()
    replayed, had_checkpoint = _replay_size(store)
    restarted = time.monotonic()
    collector = start_collector(store, port, home / "restarted.log", *extra, wait_s=300)
    ready_s = time.monotonic() - restarted
    down_s = time.monotonic() - killed
    return collector, Restart(empty_s, ready_s, down_s, replayed, had_checkpoint)


def _report(args: argparse.Namespace, sent: list[Sent], restart: Restart, store: Path) -> None:
    firing, resolved, stored = _alerts(store)
    acked = sum(s.samples for s in sent)
    elapsed = args.before + args.after
    dup_alerts = sum(c - 1 for c in firing.values()) + sum(resolved.values())
    dup_told = sum(max(0, _Hook.told[i] - 1) for i in firing)
    untold = sum(1 for i in firing if _Hook.told[i] == 0)
    rows = [
        ("senders x rate", f"{args.senders} x {args.rate / args.senders:,.0f} samples/s"),
        ("acknowledged", f"{acked:,} samples ({acked / elapsed:,.0f}/s over {elapsed:.0f} s)"),
        ("re-sends (collector down)", f"{sum(s.retries for s in sent):,}"),
        ("checkpoint at kill", "yes" if restart.had_checkpoint else "none yet (cold start)"),
        ("replayed at restart", f"{restart.replayed:,} samples"),
        ("time to ready (restart)", f"{restart.ready_s:.2f} s"),
        ("time to ready (empty store)", f"{restart.empty_s:.2f} s"),
        ("down (kill to ready)", f"{restart.down_s:.2f} s"),
        ("samples lost", f"{max(0, acked - stored):,}"),
        ("samples stored, never acknowledged", f"{max(0, stored - acked):,}"),
        ("alerts firing", f"{len(firing)} (one per sender's hot GPU)"),
        ("alerts duplicated", f"{dup_alerts} (fired again or resolved)"),
        ("notifications duplicated", f"{dup_told} ({untold} alerts never notified)"),
    ]  # fmt: skip
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _run(args: argparse.Namespace, home: Path) -> None:
    port = free_port()
    go, results, senders = start_senders(_sender, args.senders, port, args)
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    extra = _collector_args(home, f"http://127.0.0.1:{hook.server_address[1]}/alerts", args)
    collector, restart = _kill_and_restart(args, home, port, extra, go)
    sent = [results.get() for _ in senders]
    for process in senders:
        process.join()
    time.sleep(1.0)  # the last notifications go out
    collector.send_signal(signal.SIGTERM)
    collector.wait(timeout=300)
    hook.shutdown()
    _report(args, sent, restart, home / "store.duckdb")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--rate", type=float, default=100_000, help="samples/s, all senders")
    parser.add_argument("--batch", type=int, default=5_000, help="samples per batch")
    parser.add_argument("--before", type=float, default=20.0, help="seconds before the kill")
    parser.add_argument("--after", type=float, default=15.0, help="seconds after it")
    parser.add_argument("--checkpoint-interval", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepwatch-bench-") as tmp:
        _run(args, Path(tmp))


if __name__ == "__main__":
    main()
