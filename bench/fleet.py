"""A simulated fleet through a RabbitMQ broker into two collectors on this machine: throughput,
latency, alerts, a collector killed mid-run, and remote write.

Run: python bench/fleet.py [--runs 32 --nodes 64 --hz 10 --producers 4 --seconds 30
                            --kill-seconds 30 --no-remote-write]

Starts Debian's rabbitmq-server on loopback (a data directory, ports and Erlang port mapper of
its own) and two collectors (``python -m stepwatch.server --broker URL --broker-partitions 16
--collector-id c0|c1``, fresh stores), and waits until each one's ``GET /api/v1/fleet`` shows
both members and every partition read once. The simulated fleet is ``--nodes`` nodes of 8
GPUs shared by ``--runs`` runs; each node sends, as its agent and its ranks' SDKs would, one
SWB batch per second of the run's training metrics (step, compute, data and communication
time of every rank; loss, gradient norm and tokens/s of rank 0), its GPUs' metrics and its
host's, each series sampled ``--hz`` times a second, plus one sample of ``bench.sent_at``
(the wall time the batch was published). Forked producer processes publish the batches with
the real producer path (``stepwatch.spool.open_transport`` on the ``amqp://`` URL: a batch is
published once the broker confirmed it).

1. Throughput: the producers publish as fast as the collectors commit (they hold back when
   more than ``--backlog`` samples wait in the broker) for ``--seconds``: samples/s committed
   across both collectors (their ``stepwatch_ingest_samples_total``), messages/s, and the CPU
   time each part took a sample (collectors, broker, producers; all share this machine's
   cores); bytes a sample in the broker's streams.
2. Latency: the fleet at its own pace (one batch per node per second) for ``--seconds``:
   publish-to-committed latency (``bench.sent_at`` read back from its owner's
   ``GET /api/v1/query/latest``, polled every 50 ms), and one NaN loss in each run: from
   publishing the batch holding it to ``GET /api/v1/alerts?kind=nonfinite`` on the owner
   listing it (polled every 50 ms).
3. A collector killed: the same pace on new runs for ``--kill-seconds``; c1 is killed (SIGKILL)
   a third of the way in. The seconds until c0 reads every partition; until the first new
   sample of c1's runs, and their first sample again under a second behind, are queryable on
   c0 (it reads c1's partitions from the start of their streams, c1's earlier rounds
   included); then, once the producers are done, per run on c0: steps sent against those
   stored, for the loss and every rank's step time (lost, duplicated). The store's bytes a
   sample, after c0 stopped gracefully.
4. Remote write: a new broker and two collectors each forwarding by ``--remote-write`` to one
   Prometheus (Debian's, its receiver on), the throughput round again: samples/s committed
   against round 1, and forwarded samples/s (from the start to none waiting).

Prints figures and the scale of the simulation against a 100,000-GPU fleet; never passes or
fails on time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import multiprocessing as mp
import signal
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np
import psutil
from _broker import Broker
from _collector import free_port, start_collector
from _node_metrics import GPU, GPUS, HOST, LEVEL, RUN, TRAIN
from _senders import start_senders
from forward import _prometheus

from stepwatch.spool import TransportError, open_transport
from stepwatch.wire import BINARY_CONTENT_TYPE, encode, partition_of

PARTITIONS = 16
TICK_S = 1.0
WAIT_S = 90.0
POLL_S = 0.05
MARKER = "bench.sent_at"
FLEET_GPUS = 100_000
#: Series of a node: its ranks' timings, its GPUs', its host's (rank 0's node adds 3 more).
NODE_SERIES = GPUS * (len(TRAIN) + len(GPU)) + len(HOST)


# --- the simulated fleet ----------------------------------------------------------------------


@dataclass(frozen=True)
class Sim:
    """``nodes`` nodes of 8 GPUs shared round-robin by ``runs`` runs, each series at ``hz``."""

    runs: int
    nodes: int
    hz: int
    producers: int

    def run_of(self, prefix: str, node: int) -> str:
        return f"{prefix}{node % self.runs}"

    def samples_per_tick(self) -> int:
        """Samples the whole fleet sends each second (markers left out)."""
        return (self.nodes * NODE_SERIES + self.runs * len(RUN)) * self.hz


class Feed:
    """One node's batches: every series ``hz`` samples a batch, its own source and sequence."""

    def __init__(self, sim: Sim, prefix: str, node: int, t0: float, dt: float) -> None:
        self.run, j = sim.run_of(prefix, node), node // sim.runs  # j: the node's place in its run
        self.name, self.first, self.hz, self.t0, self.dt = (
            f"{self.run}-n{j}",
            j == 0,
            sim.hz,
            t0,
            dt,
        )
        keys: list[tuple[str, dict[str, str]]] = []
        for g in range(GPUS):
            rank = str(j * GPUS + g)
            for m in RUN + TRAIN if rank == "0" else TRAIN:
                keys.append((m, {"run": self.run, "node": self.name, "rank": rank}))
            keys += [(m, {"run": self.run, "node": self.name, "gpu": str(g)}) for m in GPU]
        keys += [(m, {"run": self.run, "node": self.name}) for m in HOST]
        self.keys = [*keys, (MARKER, {"run": self.run, "node": self.name})]
        k = self.k = len(keys)
        self.series = np.concatenate(
            [np.tile(np.arange(k, dtype=np.uint32), self.hz), np.array([k], dtype=np.uint32)]
        )
        self.level = np.tile([LEVEL[m][0] for m, _ in keys], self.hz)
        self.noise = np.tile([LEVEL[m][1] for m, _ in keys], self.hz)
        self.train = np.tile([m.startswith("train.") for m, _ in keys], self.hz)
        self.loss = next((i for i, (m, _) in enumerate(keys) if m == "train.loss"), None)
        self.rng = np.random.default_rng(node)
        self.ticks = 0  # batches the broker confirmed

    @property
    def samples(self) -> int:
        """Samples a batch holds (its marker included)."""
        return self.k * self.hz + 1

    def frame(self, sent_at: float, nan: bool = False) -> bytes:
        """The next batch: samples ``ticks * hz`` to ``(ticks + 1) * hz - 1`` of each series."""
        j = np.repeat(np.arange(self.ticks * self.hz, (self.ticks + 1) * self.hz), self.k)
        ts = np.append(self.t0 + j * self.dt, self.t0 + j[-1] * self.dt)
        step = np.append(np.where(self.train, j, -1), self.ticks).astype(np.int64)
        value = self.level + self.rng.normal(size=len(self.level)) * self.noise
        if nan and self.loss is not None:
            value[self.loss] = math.nan
        value = np.append(value, sent_at)
        return encode(self.name, self.ticks + 1, self.keys, value, ts, step, self.series)


@dataclass(frozen=True)
class Phase:
    """What the producers do: ``paced`` (one batch a node a tick) or as fast as the gate lets."""

    prefix: str
    seconds: float
    paced: bool
    t0: float
    dt: float
    nan_at: float | None = None  # paced: each run's NaN loss, spread over [nan_at, 80 %]


@dataclass
class Produced:
    """What one producer had confirmed."""

    samples: int = 0
    batches: int = 0
    bytes: int = 0
    behind: int = 0  # paced batches published more than a tick late
    cpu_s: float = 0.0
    ticks: dict[str, int] = field(default_factory=dict)  # node -> batches confirmed
    nan: dict[str, float] = field(default_factory=dict)  # run -> when its NaN was published


def _publish(client: Any, frame: bytes) -> None:
    """Publish until the broker confirms (a refusal to route is a bug, not load)."""
    while True:
        try:
            response = client.post("/api/v1/ingest", frame, BINARY_CONTENT_TYPE)
        except TransportError:
            time.sleep(0.2)
            continue
        if response.status != 200:
            raise SystemExit(f"the broker client refused a batch: {response.body}")
        return


def _produce(
    index: int, url: str, sim: Sim, phase: Phase, gate: tuple[Any, Any], go: Any, out: Any
) -> None:
    """Publish this producer's nodes' batches for ``phase.seconds``."""
    published, allowed = gate
    feeds = [
        Feed(sim, phase.prefix, n, phase.t0, phase.dt)
        for n in range(sim.nodes)
        if n % sim.producers == index
    ]
    runs = sorted({f.run for f in feeds if f.first})
    nan_due = {}
    if phase.nan_at is not None:
        span = max(0.0, 0.8 * phase.seconds - phase.nan_at)
        for run in runs:
            r = int(run[len(phase.prefix) :])
            nan_due[run] = phase.nan_at + span * r / max(1, sim.runs)
    client = open_transport(url, None)
    done = Produced()
    go.wait()
    cpu0 = time.process_time()
    start = time.time()
    end = start + phase.seconds
    due = [start + TICK_S * i / len(feeds) for i in range(len(feeds))]
    while True:
        if phase.paced:
            i = min(range(len(feeds)), key=due.__getitem__)
            wait = due[i] - time.time()
            if due[i] >= end:
                break
            if wait > 0:
                time.sleep(wait)
            elif wait < -TICK_S:
                done.behind += 1
            due[i] += TICK_S
            chosen = [feeds[i]]
        elif time.time() >= end:
            break
        else:
            chosen = feeds
        for feed in chosen:
            if not phase.paced:
                while published.value + feed.samples > allowed.value and time.time() < end:
                    time.sleep(0.002)
                if time.time() >= end:
                    break
            nan = feed.first and feed.run in nan_due and time.time() - start >= nan_due[feed.run]
            sent_at = time.time()
            frame = feed.frame(sent_at, nan)
            _publish(client, frame)
            if nan:
                done.nan[feed.run] = sent_at
                del nan_due[feed.run]
            feed.ticks += 1
            done.batches += 1
            done.samples += feed.samples
            done.bytes += len(frame)
            with published.get_lock():
                published.value += feed.samples
    client.close()
    done.cpu_s = time.process_time() - cpu0
    done.ticks = {f.name: f.ticks for f in feeds}
    out.put(done)


# --- the collectors ---------------------------------------------------------------------------


def _get(port: int, path: str, params: dict[str, Any] | None = None) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path + ("?" + urlencode(params) if params else ""))
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise OSError(f"GET {path}: HTTP {response.status}: {body[:200]!r}")
        return body.decode() if path == "/metrics" else json.loads(body)
    finally:
        conn.close()


def _figures(port: int) -> dict[str, float]:
    """The collector's /metrics figures this bench reads."""
    out: dict[str, float] = defaultdict(float)
    for line in _get(port, "/metrics").splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith("stepwatch_ingest_samples_total"):
            out["samples"] += float(value)
        elif name.startswith("stepwatch_broker_messages_total"):
            out[name.split('outcome="')[1].split('"')[0]] += float(value)
        elif name.startswith("stepwatch_forward_samples_total"):
            out["forward_" + name.split('outcome="')[1].split('"')[0]] += float(value)
        elif name.startswith("stepwatch_writer_commit_seconds_sum"):
            out["commit_s"] += float(value)
        elif name.startswith("stepwatch_writer_commit_seconds_count"):
            out["commits"] += float(value)
        elif name.startswith("stepwatch_forward_pending_samples"):
            out["forward_pending"] += float(value)
    return out


@dataclass
class Node:
    """A collector of the fleet, as this bench started it."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]
    store: Path

    def reads(self) -> list[int]:
        fleet = _get(self.port, "/api/v1/fleet")
        return next((m["partitions"] for m in fleet["members"] if m["id"] == fleet["self"]), [])

    def cpu_s(self) -> float:
        try:
            used = psutil.Process(self.proc.pid).cpu_times()
        except psutil.Error:
            return 0.0
        return float(used.user + used.system)


def _start_fleet(home: Path, url: str, extra: tuple[str, ...] = ()) -> list[Node]:
    nodes = []
    for name in ("c0", "c1"):
        port, store = free_port(), home / name / "store.duckdb"
        store.parent.mkdir(parents=True)
        proc = start_collector(
            store, port, home / name / "collector.log", "--no-auth", "--forecast-interval", "0",
            "--broker", url, "--broker-partitions", str(PARTITIONS), "--collector-id", name,
            *extra,
        )  # fmt: skip
        nodes.append(Node(name, port, proc, store))
    began = time.monotonic()
    while not _balanced(nodes):
        if time.monotonic() - began > WAIT_S:
            raise SystemExit("the two collectors did not share the partitions")
        time.sleep(0.2)
    print(f"  fleet up: 2 collectors share {PARTITIONS} partitions "
          f"({time.monotonic() - began:.1f} s after both answered)")  # fmt: skip
    return nodes


def _balanced(nodes: list[Node]) -> bool:
    read: list[int] = []
    for node in nodes:
        fleet = _get(node.port, "/api/v1/fleet")
        if len(fleet["members"]) != len(nodes):
            return False
        read += node.reads()
    return sorted(read) == list(range(PARTITIONS))


def _stop(node: Node) -> None:
    if node.proc.poll() is None:
        node.proc.send_signal(signal.SIGTERM)
        try:
            node.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait()


def _committed(nodes: list[Node]) -> float:
    return sum(_figures(n.port)["samples"] for n in nodes if n.proc.poll() is None)


# --- measuring --------------------------------------------------------------------------------


class Watch:
    """Polls the live collectors: each node's newest ``bench.sent_at`` and each nonfinite alert
    of a run, every ``POLL_S``; keeps when each was first seen."""

    def __init__(self, nodes: list[Node], prefix: str) -> None:
        self.nodes, self.prefix = nodes, prefix
        self.last: dict[str, int] = {}
        self.latency: list[tuple[float, str, float]] = []  # (seen, run, seconds since sent)
        self.alerts: dict[str, float] = {}  # run -> first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            for node in self.nodes:
                if node.proc.poll() is not None:
                    continue
                try:
                    latest = _get(node.port, "/api/v1/query/latest", {"name": MARKER})
                    now = time.time()
                    wanted = {"kind": "nonfinite", "state": "all", "limit": 10000}
                    alerts = _get(node.port, "/api/v1/alerts", wanted)
                    seen = time.time()
                except (OSError, ValueError, http.client.HTTPException):
                    continue
                for row in latest:
                    where, step = row["labels"]["node"], int(row["step"])
                    if not where.startswith(self.prefix) or step <= self.last.get(where, -1):
                        continue
                    self.last[where] = step
                    self.latency.append((now, row["labels"]["run"], now - float(row["value"])))
                for alert in alerts:
                    run = alert.get("labels", {}).get("run", "")
                    if run.startswith(self.prefix):
                        self.alerts.setdefault(run, seen)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _ms(values: list[float]) -> str:
    if not values:
        return "none seen"
    ms = np.array(values) * 1e3
    return (f"p50 {np.percentile(ms, 50):,.0f} ms, p99 {np.percentile(ms, 99):,.0f} ms, "
            f"max {ms.max():,.0f} ms ({len(ms):,})")  # fmt: skip


def _launch(url: str, sim: Sim, phase: Phase) -> tuple[Any, Any, list[Any], tuple[Any, Any]]:
    ctx = mp.get_context("fork")
    gate = (ctx.Value("q", 0), ctx.Value("q", 0))
    go, results, procs = start_senders(_produce, sim.producers, url, sim, phase, gate)
    return go, results, procs, gate


def _collect(results: Any, procs: list[Any]) -> list[Produced]:
    done = [results.get() for _ in procs]
    for p in procs:
        p.join()
    return done


def throughput(
    url: str, broker: Broker, nodes: list[Node], sim: Sim, args: argparse.Namespace, prefix: str
) -> dict[str, float]:
    """Round 1 (and 4): the producers as fast as the collectors commit."""
    t0 = time.time() - 1800.0  # Prometheus takes samples of the last hour or so
    phase = Phase(prefix, args.seconds, False, t0, 1e-3)
    go, results, procs, (published, allowed) = _launch(url, sim, phase)
    time.sleep(1.0)
    base, disk0 = _committed(nodes), broker.disk_bytes()
    allowed.value = args.backlog
    start = time.monotonic()
    go.set()
    warm = start + min(5.0, args.seconds / 4)
    mark: tuple[float, float, dict[str, dict[str, float]], dict[str, float]] | None = None
    while time.monotonic() < start + args.seconds:
        committed = _committed(nodes) - base
        allowed.value = int(committed) + args.backlog
        if mark is None and time.monotonic() >= warm:
            per = {n.name: _figures(n.port) for n in nodes}
            cpu = {n.name: n.cpu_s() for n in nodes} | {"broker": broker.cpu_s()}
            mark = (time.monotonic(), committed, per, cpu)
        time.sleep(0.1)
    end, committed = time.monotonic(), _committed(nodes) - base
    per = {n.name: _figures(n.port) for n in nodes}
    cpu = {n.name: n.cpu_s() for n in nodes} | {"broker": broker.cpu_s()}
    done = _collect(results, procs)
    sent = sum(d.samples for d in done)
    while _committed(nodes) - base < sent and time.monotonic() - end < 300:
        time.sleep(0.2)
    drained = time.monotonic()
    assert mark is not None
    window = end - mark[0]
    rate = (committed - mark[1]) / window
    samples = committed - mark[1]
    cpu_us = {k: 1e6 * (cpu[k] - mark[3][k]) / samples for k in cpu}
    delta = {n.name: {k: per[n.name][k] - mark[2][n.name][k] for k in per[n.name]} for n in nodes}
    shares = {name: d["samples"] / window for name, d in delta.items()}
    runs = {sim.run_of(prefix, n) for n in range(sim.nodes)}
    used = {partition_of(run, PARTITIONS) for run in runs}
    batches, frames = sum(d.batches for d in done), sum(d.bytes for d in done)
    producers_us = 1e6 * sum(d.cpu_s for d in done) / sent
    disk = broker.disk_bytes() - disk0
    print(
        f"  published {sent:,} samples in {batches:,} batches over {args.seconds:g} s "
        f"({sent / batches:,.0f} samples, {frames / batches / 1024:,.1f} KiB a batch; "
        f"{frames / sent:.1f} bytes a sample)"
    )
    print(
        f"  committed across both collectors: {rate:,.0f} samples/s, "
        f"{rate / (sent / batches):,.0f} batches/s (steady window of {window:.0f} s; "
        + ", ".join(f"{k} {v:,.0f}" for k, v in shares.items())
        + f"); all committed {drained - end:.1f} s after publishing stopped"
    )
    print(
        "  CPU a sample committed: "
        + ", ".join(f"{k} {v:.2f} µs" for k, v in cpu_us.items())
        + f", producers {producers_us:.2f} µs (publishing included); "
        f"{psutil.cpu_count()} cores shared by all"
    )
    batch_rate = rate / (sent / batches)
    commits = ", ".join(
        f"{k} {d['commits'] / window:.0f}/s, {1e3 * d['commit_s'] / max(1, d['commits']):.0f} ms"
        for k, d in delta.items()
    )
    print(
        f"  {len(used)} of {PARTITIONS} partitions carried the {len(runs)} runs: "
        f"{batch_rate / len(used):.1f} batches/s a partition; group commits: {commits}"
    )
    print(
        f"  broker's data directory grew {disk / 2**20:,.0f} MiB: {disk / sent:.1f} bytes a sample"
    )
    out = {"rate": rate, "batch_samples": sent / batches, "broker_bytes": disk / sent}
    out |= {"start": start, "drained": drained, "sent": sent}
    return out | {f"cpu_{k}": v for k, v in cpu_us.items()} | {"cpu_producers": producers_us}


def latency(url: str, nodes: list[Node], sim: Sim, args: argparse.Namespace) -> None:
    """Round 2: the fleet at its pace, each run's NaN loss once."""
    phase = Phase(
        "b", args.seconds, True, time.time(), 1.0 / sim.hz, nan_at=min(5.0, args.seconds / 4)
    )
    go, results, procs, _ = _launch(url, sim, phase)
    watch = Watch(nodes, "b")
    time.sleep(1.0)
    go.set()
    done = _collect(results, procs)
    time.sleep(3.0)
    watch.close()
    sent = {run: at for d in done for run, at in d.nan.items()}
    delays = [watch.alerts[run] - at for run, at in sent.items() if run in watch.alerts]
    behind = sum(d.behind for d in done)
    print(
        f"  {sum(d.samples for d in done) / args.seconds:,.0f} samples/s offered, "
        f"{sum(d.batches for d in done) / args.seconds:,.0f} batches/s ({behind} published late)"
    )
    print(f"  publish to queryable on its owner: {_ms([s for _, _, s in watch.latency])}")
    print(f"  NaN loss published to its alert listed: {_ms(delays)}; "
          f"{len(delays)} of {len(sent)} runs alerted")  # fmt: skip


def kill(url: str, nodes: list[Node], sim: Sim, args: argparse.Namespace) -> Node:
    """Round 3: c1 killed mid-run; what c0 takes over, and whether every step is there once."""
    c0, c1 = nodes
    phase = Phase("k", args.kill_seconds, True, time.time(), 1.0 / sim.hz)
    moved = {
        sim.run_of("k", n)
        for n in range(sim.runs)
        if partition_of(sim.run_of("k", n), PARTITIONS) in c1.reads()
    }
    go, results, procs, _ = _launch(url, sim, phase)
    watch = Watch(nodes, "k")
    time.sleep(1.0)
    go.set()
    time.sleep(args.kill_seconds / 3)
    c1.proc.kill()
    killed, killed_wall = time.monotonic(), time.time()
    c1.proc.wait()
    while len(c0.reads()) < PARTITIONS:
        time.sleep(0.05)
    taken = time.monotonic() - killed
    done = _collect(results, procs)
    on_c0 = [(seen - killed_wall, s) for seen, run, s in list(watch.latency) if run in moved]
    after = [(t, s) for t, s in on_c0 if t > 0]
    first = min((t for t, _ in after), default=math.nan)
    live = min((t for t, s in after if s < 1.0), default=math.nan)
    print(
        f"  c1 killed {args.kill_seconds / 3:.0f} s in, owning {len(moved)} of {sim.runs} runs: "
        f"c0 reads all {PARTITIONS} partitions {taken:.2f} s later; a new sample of those runs "
        f"queryable on c0 after {first:.1f} s, one under a second old after {live:.1f} s"
    )
    watch.close()
    ticks = {node: n for d in done for node, n in d.ticks.items()}
    began = time.monotonic()
    while True:
        counts = _count(c0, sim, ticks)
        if counts["lost"] == counts["missing"] == 0 or time.monotonic() - began > 300:
            break
        time.sleep(2.0)
    print(
        f"  on c0, {time.monotonic() - began:.1f} s after the producers finished: "
        f"{counts['series']:,} series of {sim.runs} runs (loss, step time of every rank), "
        f"{counts['sent']:,} samples sent, {counts['stored']:,} stored, "
        f"lost {counts['lost']} (series missing {counts['missing']}), "
        f"duplicated {counts['duplicates']}"
    )
    figures = _figures(c0.port)
    print(
        f"  c0's broker messages: taken {figures['taken']:,.0f}, "
        f"refused {figures['refused']:,.0f}, retried {figures['retried']:,.0f}"
    )
    return c0


def _count(c0: Node, sim: Sim, ticks: dict[str, int]) -> dict[str, int]:
    """Steps sent against those c0 stored, for each run's loss and every rank's step time."""
    out = dict.fromkeys(("series", "sent", "stored", "lost", "duplicates"), 0)
    out["missing"] = (
        sim.nodes * GPUS + sim.runs
    )  # series expected: one loss a run, a step time a rank
    for r in range(sim.runs):
        run = f"k{r}"
        for name in ("train.loss", "train.step_time_s"):
            for info in _get(c0.port, "/api/v1/series", {"name": name, "run": run}):
                node = info["labels"]["node"]
                raw = _get(c0.port, "/api/v1/query/raw", {"series": info["id"]})
                steps = [int(s) for s in raw["step"]]
                expected = ticks.get(node, 0) * sim.hz
                distinct = set(steps)
                out["series"] += 1
                out["missing"] -= 1
                out["sent"] += expected
                out["stored"] += len(steps)
                out["lost"] += len(set(range(expected)) - distinct)
                out["duplicates"] += len(steps) - len(distinct)
    return out


def _store_bytes(node: Node) -> int:
    return sum(p.stat().st_size for p in node.store.parent.iterdir()
               if p.name.startswith(node.store.name) and not p.name.endswith(".json"))  # fmt: skip


def remote_write(
    sim: Sim, args: argparse.Namespace, workdir: Path, alone: dict[str, float]
) -> None:
    """Round 4: both collectors forwarding to one Prometheus, the throughput round again."""
    prometheus, target = _prometheus(workdir / "prometheus")
    broker = Broker(workdir / "broker2").start()
    nodes: list[Node] = []
    try:
        nodes = _start_fleet(workdir / "fleet2", broker.url, ("--remote-write", target))
        prom0 = psutil.Process(prometheus.pid).cpu_times()
        got = throughput(broker.url, broker, nodes, sim, args, "w")
        while sum(_figures(n.port)["forward_pending"] for n in nodes) > 0:
            if time.monotonic() - got["drained"] > 300:
                break
            time.sleep(0.2)
        forwarded = sum(_figures(n.port)["forward_sent"] for n in nodes)
        dropped = sum(_figures(n.port)["forward_dropped"] for n in nodes)
        done = time.monotonic()
        prom1 = psutil.Process(prometheus.pid).cpu_times()
        prom_us = 1e6 * (prom1.user + prom1.system - prom0.user - prom0.system) / max(1, forwarded)
        print(
            f"  forwarded {forwarded:,.0f} samples to Prometheus: "
            f"{forwarded / (done - got['start']):,.0f} samples/s from the start until none "
            f"waited ({done - got['drained']:.1f} s after all were committed), {dropped:,.0f} "
            f"dropped; Prometheus' CPU {prom_us:.2f} µs a sample"
        )
        print(
            f"  committed with forwarding {got['rate']:,.0f} samples/s against "
            f"{alone['rate']:,.0f} alone ({got['rate'] / alone['rate']:.1%}); "
            "the collectors' CPU a sample "
            f"{got['cpu_c0'] + got['cpu_c1']:.2f} µs against "
            f"{alone['cpu_c0'] + alone['cpu_c1']:.2f} µs (Prometheus shares the cores)"
        )
    finally:
        for node in nodes:
            _stop(node)
        broker.close()
        prometheus.send_signal(signal.SIGTERM)
        prometheus.wait(timeout=60)


def scale(sim: Sim) -> None:
    """The simulation against a fleet of 100,000 GPUs sampled once a second."""
    gpus = sim.nodes * GPUS
    per_s = sim.samples_per_tick()
    fleet_nodes = FLEET_GPUS // GPUS
    fleet = fleet_nodes * NODE_SERIES  # (rank 0's 3 run-level series left out)
    print(
        f"simulated: {sim.runs} runs x {gpus // sim.runs} GPUs = {gpus:,} GPUs on {sim.nodes} "
        f"nodes, {sim.nodes * NODE_SERIES + sim.runs * len(RUN):,} series at {sim.hz} Hz in one "
        f"batch a node a second: {per_s:,} samples/s, {sim.nodes} batches/s at its own pace"
    )
    print(
        f"a fleet of {FLEET_GPUS:,} GPUs ({fleet_nodes:,} nodes, every series at 1 Hz, one batch "
        f"a node a second): about {fleet:,} samples/s and {fleet_nodes:,} batches/s, "
        f"{fleet / per_s:,.1f} times the simulated samples/s and {fleet_nodes / sim.nodes:,.0f} "
        "times its batches/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=32)
    parser.add_argument("--nodes", type=int, default=64, help="nodes of 8 GPUs, shared by runs")
    parser.add_argument("--hz", type=int, default=10, help="samples a second of every series")
    parser.add_argument("--producers", type=int, default=4, help="publishing processes")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--kill-seconds", type=float, default=30.0)
    parser.add_argument("--backlog", type=int, default=100_000,
                        help="samples the producers let wait in the broker (round 1)")  # fmt: skip
    parser.add_argument("--load", type=float, default=0.5,
                        help="rounds 2 and 3: this share of what round 1 committed")  # fmt: skip
    parser.add_argument("--no-remote-write", action="store_true")
    args = parser.parse_args()
    if args.nodes < args.runs:
        parser.error("--nodes must be at least --runs")
    sim = Sim(args.runs, args.nodes, args.hz, args.producers)
    scale(sim)
    with tempfile.TemporaryDirectory(prefix="stepwatch-bench-") as tmp:
        workdir = Path(tmp)
        broker = Broker(workdir / "broker").start()
        nodes: list[Node] = []
        try:
            nodes = _start_fleet(workdir / "fleet", broker.url)
            print(f"== 1. throughput: {args.producers} producers as fast as the collectors commit")
            alone = throughput(broker.url, broker, nodes, sim, args, "a")
            fleet = FLEET_GPUS // GPUS * NODE_SERIES
            print(f"  a {FLEET_GPUS:,}-GPU fleet at 1 Hz ({fleet:,} samples/s) is "
                  f"{fleet / alone['rate']:,.1f} times what this machine committed")  # fmt: skip
            per_node = sim.samples_per_tick() / sim.nodes
            n = min(sim.nodes, max(1, int(args.load * alone["rate"] / per_node)))
            paced = Sim(min(sim.runs, n), n, sim.hz, min(sim.producers, n))
            rate = paced.samples_per_tick()
            print(f"== 2. latency at the fleet's pace: {n} nodes of {paced.runs} runs, "
                  f"{rate:,} samples/s ({args.load:.0%} of round 1)")  # fmt: skip
            latency(broker.url, nodes, paced, args)
            print(f"== 3. c1 killed mid-run, {args.kill_seconds:g} s at the fleet's pace")
            c0 = kill(broker.url, nodes, paced, args)
            stored = _figures(c0.port)["samples"]
            _stop(c0)
            size = _store_bytes(c0)
            print(f"  c0's store after a graceful stop: {size / 2**20:,.0f} MiB for "
                  f"{stored:,.0f} samples, {size / stored:.1f} bytes a sample")  # fmt: skip
        finally:
            for node in nodes:
                if node.proc.poll() is None:
                    node.proc.kill()
                    node.proc.wait()
            broker.close()
        if not args.no_remote_write:
            print("== 4. remote write: both collectors forwarding to one Prometheus")
            remote_write(sim, args, workdir, alone)


if __name__ == "__main__":
    main()
