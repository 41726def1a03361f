"""How light `stepwatch demo` is: simulation cost, and the CPU the whole demo takes while it runs.

Run: python bench/demo.py [--nodes 4] [--gpus 8] [--seconds 30] [--flush 1.0 2.0]
Prints microseconds per simulated step and per cluster hardware reading, then,
for each SDK flush interval, the CPU share (of one core) of the full demo
(collector + SDK runs + simulation) and of its simulation thread alone.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from stepwatch.demo import DemoConfig, HardwareSim, TrainingShape, TrainingSim, run_demo


def _simulation(shape: TrainingShape, n: int) -> tuple[float, float]:
    """Microseconds per simulated step and per hardware reading of the whole cluster."""
    training, hardware = TrainingSim(shape), HardwareSim(shape)
    t0 = time.perf_counter()
    steps = [training.step(k) for k in range(n)]
    per_step = (time.perf_counter() - t0) / n
    prev = None
    t0 = time.perf_counter()
    for i, step in enumerate(steps):
        prev = hardware.sample(i, step.activity_at(0.1), prev)
    per_reading = (time.perf_counter() - t0) / n
    return per_step * 1e6, per_reading * 1e6


def _demo_cpu(config: DemoConfig) -> tuple[float, float, int, float]:
    """(process CPU %, main-thread CPU %, samples logged, wall seconds) of one demo run."""
    cpu0, main0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
    summary = run_demo(config, out=lambda _line: None)
    wall = time.perf_counter() - wall0
    cpu = 100 * (time.process_time() - cpu0) / wall
    main = 100 * (time.thread_time() - main0) / wall
    return cpu, main, summary.samples, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--flush", type=float, nargs="+", default=[1.0, 2.0])
    args = parser.parse_args()
    shape = TrainingShape(nodes=args.nodes, gpus_per_node=args.gpus)
    step_us, reading_us = _simulation(shape, 2000)
    print(f"cluster: {args.nodes} nodes x {args.gpus} GPUs = {shape.ranks} ranks")
    print(f"simulate one step (all ranks):        {step_us:8.1f} us")
    print(f"simulate one hardware reading (all):  {reading_us:8.1f} us")
    for flush in args.flush:
        with tempfile.TemporaryDirectory() as tmp:
            config = DemoConfig(
                nodes=args.nodes,
                gpus_per_node=args.gpus,
                duration_s=args.seconds,
                store_path=Path(tmp) / "demo.duckdb",
                port=0,
                flush_interval_s=flush,
            )
            cpu, main_cpu, samples, wall = _demo_cpu(config)
        print(
            f"demo, flush every {flush:g} s: {cpu:5.1f}% of a core in all "
            f"(simulation thread {main_cpu:4.1f}%), {samples / wall:,.0f} samples/s "
            f"over {wall:.0f} s"
        )


if __name__ == "__main__":
    main()
