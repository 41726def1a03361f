"""What the collector's forecasting worker costs: CPU time per run per pass as a run's history
grows, and ingest throughput with the worker on and off.

Run: python bench/forecast_cost.py [--sizes 1000,10000,100000,1000000 --seconds 20 --runs 50]

1. Per run per pass: a store holding one running run of N steps (loss and rate at every step,
   half a second a step, an evaluation of 30 s every 1,000 steps, a plan of 2M steps for every
   N, so only the history differs), compacted as the collector keeps it; the worker's forecast
   of it (its bounded reads and ``forecast_run``) timed in CPU seconds of the whole process
   (DuckDB's threads too), the median of ``--repeat``; beside it, the same forecast from the
   whole series, as ``GET /runs/{id}/forecast`` reads them, up to ``--whole-up-to`` steps;
   and the worker's forecast lent a project's law.
   Then a project's law fitted on its ``LAW_RUNS`` newest finished runs, as the worker
   refits it when one ends: each run as its bounded read gives it (the buckets and its last
   steps), per planned length.
2. Ingest: concurrent sender processes post SWB batches of training metrics (loss, rate and
   step time of ``--runs`` running runs, each batch the next steps of its runs) to a real
   collector, once with ``--forecast-interval 0`` (off) and once with ``--forecast-interval``
   ``--interval`` (on: every run has new steps at every pass), ``--rounds`` times each, ABBA;
   samples/s acknowledged both ways, their ratio, and how many forecasts the worker made.
Prints figures; never passes or fails on time.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _collector import free_port, start_collector
from _senders import Load, post_training, register_runs, start_senders

from stepwatch.model import Run, SampleBatch, SeriesKey
from stepwatch.predict import FinishedCurve, LrSchedule, ProjectLaw, fit_project_law, forecast_run
from stepwatch.server._forecasting import forecast_bounded
from stepwatch.server._project_laws import LAW_RUNS
from stepwatch.server._run_series import DEFAULT_BOUNDS, pick_series, whole_series
from stepwatch.store import Store

T0 = 1_780_000_000.0
PLANNED = 2_000_000
STEP_S, EVAL_EVERY, EVAL_S = 0.5, 1_000, 30.0
#: Samples per batch written into the store of part 1.
CHUNK = 500_000


def _history(store: Store, steps: int) -> None:
    """Run r1 with ``steps`` steps of loss and rate logged by rank 0."""
    store.upsert_run(Run("r1", "bench", "r1", start=T0, planned_total_steps=PLANNED))
    keys = [SeriesKey.of(n, {"run": "r1", "rank": "0"}) for n in ("train.loss", "train.lr")]
    rng = np.random.default_rng(1)
    took = STEP_S * (1 + rng.normal(0, 0.02, steps))
    took[EVAL_EVERY::EVAL_EVERY] += EVAL_S
    ts, step = T0 + np.cumsum(took), np.arange(steps)
    loss = 2.0 + 3.0 * (step + 10.0) ** -0.3 + rng.normal(0, 0.01, steps)
    lr = np.full(steps, 3e-4)
    for seq, lo in enumerate(range(0, steps, CHUNK // 2), start=1):
        hi = min(steps, lo + CHUNK // 2)
        n = hi - lo
        series = np.repeat(np.array([0, 1], np.uint32)[None, :], n, 0).ravel()
        both = np.stack([loss[lo:hi], lr[lo:hi]], 1).ravel()
        store.apply([SampleBatch("bench", seq, keys, series, np.repeat(ts[lo:hi], 2),
                                 np.repeat(step[lo:hi], 2), both, [])])  # fmt: skip
    store.compact()


def _cpu(job: object, repeat: int) -> tuple[float, float]:
    """Median CPU seconds (all threads) and wall seconds of ``job()`` over ``repeat`` calls."""
    cpu, wall = [], []
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        job()  # type: ignore[operator]
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def per_run(sizes: list[int], repeat: int, whole_up_to: int, workdir: Path) -> None:
    """Part 1: the worker's forecast of one run per history size."""
    print(f"== forecast CPU per run per pass (median of {repeat}; plan {PLANNED:,} steps)")
    print(f"{'steps of history':>18} {'worker: CPU s':>14} {'wall s':>8} "
          f"{'whole series: CPU s':>20} {'lent a law: CPU s':>18}")  # fmt: skip
    law = _project_law(PLANNED)
    for size in sizes:
        with Store(workdir / f"h{size}.duckdb") as store:
            _history(store, size)
            run = store.get_run("r1")
            loss = pick_series(store, "train.loss", {"run": "r1"})
            assert run is not None and loss is not None
            end = float(store.latest_of([loss])[0][1])
            cpu, wall = _cpu(lambda: forecast_bounded(store, run, loss, end), repeat)  # noqa: B023
            whole = "–"
            if size <= whole_up_to:
                of_run = {"run": "r1"}

                def route() -> None:
                    forecast_run(whole_series(store, "train.loss", of_run),  # noqa: B023
                                 whole_series(store, "train.lr", of_run),  # noqa: B023
                                 PLANNED, run.config)  # noqa: B023  # fmt: skip

                whole = f"{_cpu(route, repeat)[0]:.3f}"
            lent = _cpu(lambda: forecast_bounded(store, run, loss, end, prior=law), repeat)[0]  # noqa: B023
        print(f"{size:>18,} {cpu:>14.3f} {wall:>8.3f} {whole:>20} {lent:>18.3f}")


def _finished(planned: int, seed: int) -> FinishedCurve:
    """A finished run of ``planned`` steps under a cosine, as a bounded read gives it: the
    loss at the buckets' steps, then at every one of its last steps."""
    bounds, rng = DEFAULT_BOUNDS, np.random.default_rng(seed)
    tail = min(planned, bounds.tail_steps)
    steps = np.unique(np.concatenate([
        np.linspace(0, planned - tail, bounds.buckets).astype(np.int64),
        np.arange(planned - tail, planned),
    ]))  # fmt: skip
    rates = LrSchedule("cosine", 3e-4, planned, planned // 100, 3e-5).lr(np.arange(planned))
    loss = 2.0 + 3.0 * (steps + 10.0) ** -0.3 + rng.normal(0, 0.01, steps.size)
    return FinishedCurve(rates, steps, loss)


def _project_law(planned: int) -> ProjectLaw | None:
    return fit_project_law([_finished(planned, seed) for seed in range(LAW_RUNS)])


def project_law(repeat: int) -> None:
    """Part 1b: a project's law fitted on its newest finished runs."""
    print(f"== a project's law fitted on {LAW_RUNS} finished runs (median of {repeat})")
    print(f"{'planned steps':>18} {'CPU s':>8}")
    for planned in (10_000, 100_000, 1_000_000, PLANNED):
        print(f"{planned:>18,} {_cpu(lambda: _project_law(planned), repeat)[0]:>8.2f}")  # noqa: B023


def _ingest(args: argparse.Namespace, home: Path, interval: float) -> tuple[float, int]:
    """One collector on a fresh store: samples/s acknowledged, forecasts made."""
    port, store = free_port(), home / "store.duckdb"
    collector = start_collector(store, port, home / "collector.log", "--no-auth",
                                "--forecast-interval", str(interval))  # fmt: skip
    register_runs(port, args.runs, T0, PLANNED)
    load = Load(args.runs, args.senders, args.steps, args.seconds, T0, STEP_S)
    go, results, senders = start_senders(post_training, args.senders, port, load)
    time.sleep(0.5)  # the senders build their columns before the clock starts
    start = time.monotonic()
    go.set()
    sent = [results.get() for _ in senders]
    for p in senders:
        p.join()
    collector.send_signal(signal.SIGTERM)
    collector.wait(timeout=300)
    with Store(store) as opened:
        made = len(opened.forecasts.of_runs([f"run{r}" for r in range(args.runs)]))
    rate = sum(s.samples for s in sent) / (max(s.end for s in sent) - start)
    state = f"on, every {interval:g} s" if interval else "off"
    print(f"worker {state:<16} {rate:>12,.0f} samples/s   runs with a forecast: {made}")
    return rate, made


def ingest(args: argparse.Namespace, workdir: Path) -> None:
    """Part 2: ingest throughput with the worker off and on, ABBA."""
    print(f"== ingest: {args.senders} senders, {args.runs} running runs x 3 training series, "
          f"{args.steps} steps a batch, {args.seconds:g} s a collector")  # fmt: skip
    rates: dict[bool, list[float]] = {False: [], True: []}
    for i in range(args.rounds):
        for on in (False, True) if i % 2 == 0 else (True, False):
            home = workdir / f"ingest-{i}-{'on' if on else 'off'}"
            home.mkdir()
            rates[on].append(_ingest(args, home, args.interval if on else 0.0)[0])
    off, on = (statistics.median(rates[x]) for x in (False, True))
    print(f"median of {args.rounds}: off {off:,.0f} samples/s, on {on:,.0f} samples/s, "
          f"on/off {on / off:.1%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--whole-up-to", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--steps", type=int, default=100, help="steps of each run a batch")
    parser.add_argument("--interval", type=float, default=2.0, help="forecast interval, on")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepwatch-bench-") as tmp:
        per_run([int(s) for s in args.sizes.split(",")], args.repeat, args.whole_up_to, Path(tmp))
        project_law(max(1, args.repeat // 2))
        if args.seconds > 0:
            ingest(args, Path(tmp))


if __name__ == "__main__":
    main()
