"""Dashboard speed: server-side request times of its charts, and (with Chromium) time to drawn.

Run: python bench/dashboard.py [--hours H] [--dir DIR] [--keep] [--no-browser]
Builds through Store.apply (fast, no HTTP) one 10M-sample loss series and a
64-GPU run (8 nodes x 8 GPUs, every GPU metric of the vocabulary, the host
metrics and each rank's communication time at 1 Hz for H hours), starts a real
collector on that file in a subprocess, then times:
  - the 10M-sample chart: one downsample request at 1000 px (whole range and a
    zoomed tenth), target <= 200 ms request to drawn;
  - the sync heatmap of its 64 ranks (one multi request over the tiers, and the
    per-rank percentiles over raw samples it asked before);
  - every request of the hardware page of the 64-GPU run (run list, alerts, one
    request for all GPU small multiples, one for the host charts), issued at
    once as a browser does;
  - with Playwright and /usr/bin/chromium, for the overview of the 10M series
    and the hardware page: page load to every chart drawn
    (``[data-chart][data-ready="1"]``; hardware target <= 1 s), and a new time
    range (what a drag-zoom does: the hash changes, every chart refetches at its
    width) to drawn.
Prints the median and worst of several repetitions against each target.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from _collector import free_port, start_collector

from stepwatch.model import GPU_METRICS, HOST_METRICS, NO_STEP, Run, SampleBatch, SeriesKey
from stepwatch.store import Store

T0 = 1_780_000_000.0
BIG_RUN, BIG_N = "bench-10m", 10_000_000
HW_RUN, NODES, GPUS = "bench-64gpu", 8, 8
BATCH = 1_000_000
REPEAT = 15
CHROMIUM = Path("/usr/bin/chromium")
CHART_TARGET_S, HARDWARE_TARGET_S = 0.2, 1.0
#: What the hardware page charts: one request for the GPU small multiples, one for the hosts.
GPU_CHARTS = ("gpu.util_pct", "gpu.mem_used_bytes", "gpu.temp_c", "gpu.power_w")
#: What the sync heatmap draws, a row per rank.
COMM = "train.comm_time_s"
HOST_CHARTS = (
    "host.cpu_pct",
    "host.mem_used_bytes",
    "host.net_rx_bytes_per_s",
    "host.net_tx_bytes_per_s",
    "host.disk_write_bytes_per_s",
)


def _loss(n: int, rng: np.random.Generator) -> Iterator[SampleBatch]:
    """One loss curve, a sample every 0.1 s (about 11.5 days of steps)."""
    key = [SeriesKey.of("train.loss", {"run": BIG_RUN, "rank": 0})]
    for seq, lo in enumerate(range(0, n, BATCH)):
        step = np.arange(lo, min(n, lo + BATCH), dtype=np.int64)
        value = 2.0 + 8.0 * np.exp(-step / 2e6) + rng.normal(0, 0.05, step.shape[0])
        series = np.zeros(step.shape[0], np.uint32)
        yield SampleBatch("loss", seq, key, series, T0 + step * 0.1, step, value)


def _hardware(seconds: int, rng: np.random.Generator) -> Iterator[SampleBatch]:
    """Every GPU and host metric of 8 nodes x 8 GPUs, and each rank's comm time, once a second."""
    keys = (
        [
            SeriesKey.of(name, {"run": HW_RUN, "node": f"node{n}", "gpu": g})
            for n in range(NODES)
            for g in range(GPUS)
            for name in GPU_METRICS
        ]
        + [
            SeriesKey.of(COMM, {"run": HW_RUN, "node": f"node{n}", "rank": n * GPUS + g})
            for n in range(NODES)
            for g in range(GPUS)
        ]
        + [
            SeriesKey.of(name, {"run": HW_RUN, "node": f"node{n}"})
            for n in range(NODES)
            for name in HOST_METRICS
        ]
    )
    per = max(1, BATCH // len(keys))
    for seq, lo in enumerate(range(0, seconds, per)):
        t = np.arange(lo, min(seconds, lo + per), dtype=np.float64)
        series = np.tile(np.arange(len(keys), dtype=np.uint32), t.shape[0])
        ts = T0 + np.repeat(t, len(keys))
        value = rng.uniform(20.0, 100.0, ts.shape[0])
        step = np.full(ts.shape[0], NO_STEP, np.int64)
        yield SampleBatch("agent", seq, keys, series, ts, step, value)


def build(path: Path, hours: float) -> dict[str, float]:
    """The store file with both runs; seconds spent building each."""
    rng = np.random.default_rng(0)
    spent = {}
    with Store(path) as store:
        store.upsert_run(Run(BIG_RUN, name="10M-sample loss", start=T0, planned_total_steps=BIG_N))
        store.upsert_run(Run(HW_RUN, name="64 GPUs", start=T0))
        for name, batches in (
            ("10M series", _loss(BIG_N, rng)),
            ("64-GPU hardware", _hardware(int(hours * 3600), rng)),
        ):
            t0 = time.perf_counter()
            for batch in batches:
                store.apply([batch])
            store.compact()
            spent[name] = time.perf_counter() - t0
        spent["samples"] = store.stats()["samples"]
    return spent


def timed(fn: Callable[[], Any], repeat: int = REPEAT) -> list[float]:
    fn()  # warm: connection, catalogue, DuckDB caches
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def report(name: str, times: list[float], target: float | None = None) -> None:
    med, worst = statistics.median(times), max(times)
    verdict = "" if target is None else ("  ok" if med <= target else "  OVER TARGET")
    limit = "" if target is None else f" (target <= {target * 1000:.0f} ms)"
    print(f"  {name:<58} median {med * 1000:7.1f} ms  worst {worst * 1000:7.1f} ms{limit}{verdict}")


def _get(client: httpx.Client, path: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    response.raise_for_status()
    return response.json()


def server_side(url: str, hours: float) -> None:
    client = httpx.Client(base_url=url, timeout=60)
    (loss,) = _get(client, "/api/v1/series", name="train.loss", run=BIG_RUN)
    end = T0 + (BIG_N - 1) * 0.1
    print("10M-sample series, one chart at 1000 px:")
    for label, start in (("whole range", T0), ("zoomed to the last tenth", end - (end - T0) / 10)):
        report(
            f"downsample, {label}",
            timed(
                lambda s=start: _get(
                    client,
                    "/api/v1/query/downsample",
                    series=loss["id"],
                    start=s,
                    end=end,
                    points=1000,
                )
            ),
            CHART_TARGET_S,
        )
        report(
            f"multi (what the overview asks), {label}",
            timed(
                lambda s=start: _get(
                    client,
                    "/api/v1/query/multi",
                    name="train.loss",
                    run=BIG_RUN,
                    start=s,
                    end=end,
                    points=1000,
                )
            ),
            CHART_TARGET_S,
        )
    hw_end = T0 + hours * 3600 - 1
    rng = {"run": HW_RUN, "start": T0, "end": hw_end}
    gpu = {**rng, "points": 253, "fields": "last"}  # a small multiple's width at 1440 px
    host = {**rng, "points": 439, "fields": "last"}
    page: list[tuple[str, dict[str, Any]]] = [
        ("/api/v1/runs/summary", {}),
        ("/api/v1/alerts", {"run": HW_RUN, "state": "all"}),
        ("/api/v1/query/multi", {"name": list(GPU_CHARTS), **gpu}),
        ("/api/v1/query/multi", {"name": list(HOST_CHARTS), **host}),
    ]
    heatmap = {**rng, "name": COMM, "points": 693}  # half the heatmap's width at 1440 px
    print(f"sync heatmap of the 64-GPU run ({hours:g} h at 1 Hz), 64 ranks:")
    report(
        "multi, slowest per bucket (what the page asks, from the tiers)",
        timed(lambda: _get(client, "/api/v1/query/multi", **heatmap, fields="max"), 5),
    )
    report(
        "percentiles by rank, median (what it asked before, raw samples)",
        timed(lambda: _get(client, "/api/v1/query/percentiles", **heatmap, q=0.5, by="rank"), 5),
    )
    print(f"hardware page of the 64-GPU run ({hours:g} h at 1 Hz), {len(page)} requests:")
    with ThreadPoolExecutor(6) as pool:
        clients = [httpx.Client(base_url=url, timeout=60) for _ in range(6)]

        def whole_page() -> None:
            list(
                pool.map(lambda i: _get(clients[i % 6], page[i][0], **page[i][1]), range(len(page)))
            )

        report("all requests at once (six connections)", timed(whole_page, 7), HARDWARE_TARGET_S)
        for path, params in page:
            what = "all GPU metrics" if params.get("name") == list(GPU_CHARTS) else ""
            what = "all host metrics" if params.get("name") == list(HOST_CHARTS) else what
            report(
                f"  one: {path.removeprefix('/api/v1/')} {what}",
                timed(lambda p=path, q=params: _get(client, p, **q), 5),
            )
        for c in clients:
            c.close()
    client.close()


_READY = """() => { const c = document.querySelectorAll('[data-chart]');
    return document.querySelector('[data-view] h2') !== null && c.length > 0
        && Array.from(c).every(x => x.dataset.ready === '1'); }"""

#: In the page: go to ``route`` (a hash) and resolve with the ms until every chart drew its range.
_ROUTE_TO_DRAWN = """async ([route, start]) => {
    const t0 = performance.now();
    location.hash = route;
    await new Promise((done) => {
        const tick = () => {
            const c = Array.from(document.querySelectorAll('[data-chart]'));
            const drawn = (x) => x.dataset.ready === '1' && Number(x.dataset.start) === start;
            if (c.length && c.every(drawn)) done();
            else requestAnimationFrame(tick);
        };
        requestAnimationFrame(tick);
    });
    return performance.now() - t0;
}"""


def browser(url: str, hours: float) -> None:
    """In headless Chromium: page load to drawn, and a zoom (new range) to drawn."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("browser: playwright is not installed; skipped")
        return
    if not CHROMIUM.exists():
        print(f"browser: {CHROMIUM} is missing; skipped")
        return
    big_end, hw_end = T0 + (BIG_N - 1) * 0.1, T0 + hours * 3600 - 1
    print("in Chromium (1440 x 900):")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for label, view, run, end, target, load_target in (
            ("overview of the 10M series", "overview", BIG_RUN, big_end, CHART_TARGET_S, None),
            ("hardware page, 64 GPUs", "hardware", HW_RUN, hw_end, *(HARDWARE_TARGET_S,) * 2),
        ):
            loads, zooms = [], []
            for i in range(6):
                page = chromium.new_page(viewport={"width": 1440, "height": 900})
                page.goto(f"{url}/#/{view}?run={run}")
                page.wait_for_function(_READY, timeout=60_000, polling="raf")
                loads.append(page.evaluate("performance.now()") / 1000)
                charts = page.eval_on_selector_all("[data-chart]", "els => els.length")
                a = T0 + (end - T0) * (0.1 + 0.05 * i)
                b = a + (end - T0) / 4
                route = f"#/{view}?run={run}&from={a:.3f}&to={b:.3f}"
                zooms.append(page.evaluate(_ROUTE_TO_DRAWN, [route, float(f"{a:.3f}")]) / 1000)
                page.close()
            report(f"{label} ({charts} charts): page load to drawn", loads[1:], load_target)
            report(f"{label}: new range to drawn", zooms[1:], target)
        chromium.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=3.0, help="hardware history of the run")
    parser.add_argument("--dir", type=Path, default=None, help="where the store goes")
    parser.add_argument("--keep", action="store_true", help="keep the store afterwards")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    home = Path(args.dir or tempfile.mkdtemp(prefix="stepwatch-bench-dashboard-"))
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dashboard.duckdb"
    try:
        if not path.exists():
            spent = build(path, args.hours)
            print(
                f"built {int(spent.pop('samples')):,} samples: "
                + ", ".join(f"{k} {v:.1f} s" for k, v in spent.items())
            )
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = start_collector(path, port, home / "collector.log", wait_s=120)
        try:
            server_side(url, args.hours)
            if not args.no_browser:
                browser(url, args.hours)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
