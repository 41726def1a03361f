"""Training-thread cost of logging 10 scalars a step: stepwatch vs TensorBoard, W&B, MLflow, Aim.

Run: python bench/log_overhead.py [--steps N] [--budget-s S]
Each logger runs in its own subprocess on a temp dir, so one's threads and
imports do not disturb another's; a logger that is not installed is listed
with the pip command that adds it (the ``[bench]`` extra). Only the logging
loop is timed (after a warm-up); closing is shown apart. Then stepwatch's
latency from ``log`` to the batch being fsync'ed in the spool is probed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Step = Callable[[int, dict[str, float]], None]
Setup = Callable[[str], tuple[Step, Callable[[], None]]]

NAMES = ["loss", "lr", "grad_norm", "tokens_per_s", *(f"metric_{j}" for j in range(6))]
WARMUP = 50
PROBES = 10
CHILD_SETUP_S = 180.0  # imports, setup and close of one logger, on top of its budget


def _stepwatch(tmp: str) -> tuple[Step, Callable[[], None]]:
    import stepwatch

    run = stepwatch.init(project="bench", dir=tmp, run_id="bench")
    return (lambda i, d: run.log(d, step=i)), run.finish


def _tensorboard(tmp: str) -> tuple[Step, Callable[[], None]]:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=tmp)

    def step(i: int, d: dict[str, float]) -> None:
        for name, value in d.items():
            writer.add_scalar(name, value, i)

    return step, writer.close


def _wandb(tmp: str) -> tuple[Step, Callable[[], None]]:
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=tmp)
    import wandb

    run = wandb.init(project="bench", dir=tmp, mode="offline")
    return (lambda i, d: run.log(d, step=i)), run.finish


def _mlflow(synchronous: bool) -> Setup:
    def setup(tmp: str) -> tuple[Step, Callable[[], None]]:
        import mlflow

        mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
        mlflow.start_run()

        def step(i: int, d: dict[str, float]) -> None:
            mlflow.log_metrics(d, step=i, synchronous=synchronous)

        def close() -> None:
            mlflow.flush_async_logging()
            mlflow.end_run()

        return step, close

    return setup


def _aim(tmp: str) -> tuple[Step, Callable[[], None]]:
    from aim import Run

    run = Run(repo=tmp, experiment="bench")
    return (lambda i, d: run.track(d, step=i)), run.close


@dataclass(frozen=True)
class Logger:
    label: str
    setup: Setup
    pip: str
    max_steps: int | None = None  # for loggers whose close() drains a long queue


LOGGERS = {
    "stepwatch": Logger("stepwatch", _stepwatch, "pip install -e ."),
    "tensorboard": Logger("TensorBoard SummaryWriter", _tensorboard, "pip install tensorboard"),
    "wandb": Logger("W&B (offline)", _wandb, "pip install wandb"),
    "mlflow": Logger("MLflow (sqlite, sync)", _mlflow(True), "pip install mlflow"),
    "mlflow-async": Logger("MLflow (sqlite, async)", _mlflow(False), "pip install mlflow", 2000),
    "aim": Logger("Aim (local repo)", _aim, "pip install aim"),
}


def _payloads(steps: int) -> list[dict[str, float]]:
    """The dicts to log, built before timing so every logger pays only for logging."""
    rng = random.Random(0)
    return [{name: rng.random() for name in NAMES} for _ in range(steps)]


def measure(name: str, steps: int, budget_s: float) -> dict[str, Any]:
    """Time the logging loop of one logger (in this process); stop early past the budget."""
    steps = min(steps, LOGGERS[name].max_steps or steps)
    payloads = _payloads(WARMUP + steps)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            step, close = LOGGERS[name].setup(tmp)
        except ImportError as exc:
            return {"missing": f"not installed ({LOGGERS[name].pip}): {exc.name}"}
        for i in range(WARMUP):
            step(i, payloads[i])
        done, clock = 0, time.perf_counter
        start = clock()
        while done < steps and (done % 64 or clock() - start < budget_s):
            step(WARMUP + done, payloads[WARMUP + done])
            done += 1
        elapsed = clock() - start
        closing = clock()
        close()
        return {"us": elapsed / done * 1e6, "steps": done, "close_s": clock() - closing}


def probe_latency(probes: int) -> dict[str, Any]:
    """Seconds from ``log`` returning to its samples being fsync'ed in the spool."""
    import stepwatch

    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        run = stepwatch.init(project="bench", dir=tmp, run_id="latency")
        latencies, logged = [], 0
        for i in range(probes):
            time.sleep(rng.random())  # land anywhere in the flush interval
            run.log(dict.fromkeys(NAMES, 1.0), step=i)
            logged += len(NAMES)
            start = time.perf_counter()
            while run.durable_samples < logged:
                time.sleep(0.0005)
            latencies.append(time.perf_counter() - start)
        run.finish()
    return {"mean_s": sum(latencies) / len(latencies), "max_s": max(latencies), "probes": probes}


def _child(args: list[str], timeout_s: float) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout_s:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {tail[0][:120]}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def _row(label: str, result: dict[str, Any], base_us: float | None) -> str:
    if "us" not in result:
        return f"{label:<28} {result.get('missing') or result.get('error')}"
    ratio = f"{result['us'] / base_us:10.1f}x" if base_us else f"{'':>11}"
    return f"{label:<28} {result['us']:10.1f} {ratio} {result['steps']:>8} {result['close_s']:9.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="timed steps per logger")
    parser.add_argument("--budget-s", type=float, default=20.0, help="time cap per logger")
    parser.add_argument("--child", choices=[*LOGGERS, "latency"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "latency":
        print(json.dumps(probe_latency(PROBES)))
        return
    if args.child:
        print(json.dumps(measure(args.child, args.steps, args.budget_s)))
        return
    print(f"{len(NAMES)} scalars a step; {args.steps} steps or {args.budget_s} s per logger")
    print(f"{'logger':<28} {'us/step':>10} {'vs sw':>11} {'steps':>8} {'close s':>9}")
    base: float | None = None
    for name, logger in LOGGERS.items():
        limits = ["--steps", str(args.steps), "--budget-s", str(args.budget_s)]
        result = _child(["--child", name, *limits], CHILD_SETUP_S + args.budget_s)
        print(_row(logger.label, result, base), flush=True)
        base = base or result.get("us")
    latency = _child(["--child", "latency"], CHILD_SETUP_S)
    if "mean_s" in latency:
        print(
            f"stepwatch log -> fsync'ed in the spool: mean {latency['mean_s']:.3f} s, "
            f"max {latency['max_s']:.3f} s over {latency['probes']} probes (flush_interval_s=1.0)"
        )
    else:
        print(f"stepwatch latency probe failed: {latency.get('error')}")


if __name__ == "__main__":
    main()
