"""Cost of the list routes against the length of the history: a collector over a short one and
over a long one, each with a few alerts firing now.

Run: python bench/history.py [--records N] [--runs N] [--repeat N] [--dir DIR]
Builds two stores through Store.apply in large RecordBatches (no collector running): one with
100 past records and 10 runs, one with --records (1,000,000) past records and --runs (10,000)
runs, each run with a loss series; the records are resolved alert transitions, audit records
and finished actions, spread over the runs. With --dir the stores are kept there and used
again by the next run (a copy each time, so every run starts from the same history). A
collector starts on each, five live runs log a NaN loss through the ingest route (five alerts
fire), then every route is timed --repeat times over one kept-alive connection; the table
shows the median of each and the ratio long/short. Lists ask for pages of 10, a page the
short history fills too, so both answer the same amount.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
from _collector import free_port, start_collector

from stepwatch.model import Event, RecordBatch, Run, SampleBatch, SeriesKey
from stepwatch.store import Store

T0 = 1_780_000_000.0
SOURCE = "stepwatch.collector"
#: Records per RecordBatch while the store is built.
CHUNK = 100_000
#: Runs that fire an alert while the collector runs.
LIVE = 5
ROUTES = {
    "alerts (open)": ("/api/v1/alerts", {}),
    "alerts (all)": ("/api/v1/alerts", {"state": "all", "limit": 10}),
    "alerts (all, a run)": ("/api/v1/alerts", {"state": "all", "limit": 3, "run": "past-4"}),
    "alerts/groups": ("/api/v1/alerts/groups", {}),
    "actions": ("/api/v1/actions", {"limit": 10}),
    "audit": ("/api/v1/audit", {"limit": 10}),
    "audit, notify only": ("/api/v1/audit", {"limit": 10, "action": "notify"}),
    "runs/summary?run=": ("/api/v1/runs/summary", {"run": "live-0"}),
}


def _record(i: int, runs: int) -> Event:
    """Past record ``i``: pairs of alert transitions, audit records, now and then an action;
    ten records a run, run after run."""
    run, ts = f"past-{(i // 10) % runs}", T0 + i * 0.01
    kind = i % 10
    if kind < 6:  # an alert fired by record i - 1 resolves at record i
        aid = f"h{i // 2}"
        data = {"id": aid, "rule": "loss_spike", "group": "builtin", "kind": "loss_spike"}
        data |= {"state": "resolved" if i % 2 else "firing", "severity": "warning"}
        return Event(ts, "alert", "loss_spike", {"run": run}, data | {"since": T0, "value": 1.0})
    if kind < 9:
        data = {"action": "notify" if i % 3 else "command", "actor": "bench", "result": "ok"}
        return Event(ts, "audit", "sent", {"run": run}, data | {"kind": "loss_spike"})
    data = {"id": f"x{i}", "playbook": "drain", "labels": {"run": run}, "dry_run": True}
    data |= {"state": "ok", "requested_by": "bench", "created": ts, "updated": ts}
    return Event(ts, "action", "drain ok", {"run": run}, data)


def _losses(runs: list[str]) -> Iterator[SampleBatch]:
    """Twenty loss samples of every run, a thousand runs a batch."""
    for seq, lo in enumerate(range(0, len(runs), 1000)):
        keys = [SeriesKey.of("train.loss", {"run": r}) for r in runs[lo : lo + 1000]]
        series = np.repeat(np.arange(len(keys), dtype=np.uint32), 20)
        step = np.tile(np.arange(20, dtype=np.int64), len(keys))
        ts = T0 + step.astype(np.float64)
        yield SampleBatch("bench-loss", seq, keys, series, ts, step, 2.0 - step * 0.01)


def build(path: Path, records: int, runs: int) -> float:
    """A store with ``records`` past records over ``runs`` finished runs; seconds it took."""
    t0 = time.perf_counter()
    with Store(path) as store:
        names = [f"past-{i}" for i in range(runs)]
        store.upsert_run(*(Run(n, start=T0, status="finished", end=T0 + 20) for n in names))
        for batch in _losses(names):
            store.apply([batch])
        for lo in range(0, records, CHUNK):
            events = [_record(i, runs) for i in range(lo, min(records, lo + CHUNK))]
            store.apply([RecordBatch.of(SOURCE, events)])
        store.compact()
    return time.perf_counter() - t0


def _fire(client: httpx.Client) -> None:
    """LIVE running runs log a NaN loss; returns once their alerts are listed open."""
    for i in range(LIVE):
        run = f"live-{i}"
        assert client.post("/api/v1/runs", json={"id": run}).is_success
        samples = [
            {"name": "loss", "labels": {"run": run}, "step": s, "ts": time.time(), "value": v}
            for s, v in enumerate([2.0, 1.9, "NaN"])
        ]
        doc = {"source": f"bench-{run}", "seq": 1, "samples": samples}
        assert client.post("/api/v1/ingest", json=doc).is_success
    deadline = time.monotonic() + 60
    while len(client.get("/api/v1/alerts").json()) < LIVE:
        if time.monotonic() > deadline:
            raise SystemExit("the live alerts did not fire within 60 s")
        time.sleep(0.2)


def measure(store: Path, repeat: int) -> dict[str, float]:
    """Median seconds of each route on a collector over ``store``."""
    port = free_port()
    proc = start_collector(store, port, store.with_suffix(".log"))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            _fire(client)
            out = {}
            for name, (path, params) in ROUTES.items():
                client.get(path, params=params).raise_for_status()  # warm
                times = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    client.get(path, params=params).raise_for_status()
                    times.append(time.perf_counter() - t0)
                out[name] = statistics.median(times)
            return out
    finally:
        proc.terminate()
        proc.wait(60)


def _store(where: Path, name: str, records: int, runs: int, keep: bool) -> Path:
    """A copy (the collector writes to it) of a store of this history, built unless kept."""
    built = where / f"{name}-{records}-{runs}.duckdb"
    if not (keep and built.exists()):
        built.unlink(missing_ok=True)
        took = build(built, records, runs)
        print(f"building: {records:,} records, {runs:,} runs ... {took:.1f} s")
    copy = where / f"{name}.duckdb"
    shutil.copyfile(built, copy)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = args.dir or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        short = _store(where, "short", 100, 10, args.dir is not None)
        long = _store(where, "long", args.records, args.runs, args.dir is not None)
        a, b = measure(short, args.repeat), measure(long, args.repeat)
    head = f"{args.records:,} rec, {args.runs:,} runs"
    print(f"\n{'route (median of ' + str(args.repeat) + ')':<26} {'100 rec, 10 runs':>17} "
          f"{head:>24} {'ratio':>6}")  # fmt: skip
    for name in ROUTES:
        print(f"{name:<26} {a[name] * 1e3:>14.2f} ms {b[name] * 1e3:>21.2f} ms "
              f"{b[name] / a[name]:>6.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
