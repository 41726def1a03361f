"""The closed loop on real trainings: the same seeds diverge with and without stepwatch steering.

Run: python bench/closed_loop.py [--seeds 0 1 2 --steps 600 --step-s 0.005]

Starts ``python -m stepwatch.server`` with a rule file whose policy halves the
learning rate on ``loss_divergence``. Each seed is a least-squares problem
trained by full-batch SGD at a learning rate 2 % past the stable limit, so it
diverges after a few steps; every step is paced to ``--step-s``. Each seed runs
twice, alone and with ``stepwatch.torch.control`` attached to a run on that
collector, and prints per run: the final loss, the steps lost (steps whose
loss stood above 1.5 times the best reached before the divergence) and the
time to recovery (wall seconds from the first such step until the loss is
back below that best; "never" when it is not). Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from _collector import free_port, start_collector

import stepwatch
from stepwatch.torch import control

RULES = """
groups:
  - name: bench
    rules:
      - alert: fast_divergence
        kind: loss_divergence
        signal: {metric: train.loss, by: [run]}
        detector: {type: rise, rise: 0.5, halflife: 3, window: 500}
        for: 3 samples
        severity: critical
policies:
  rules:
    - name: calm_divergence
      kinds: [loss_divergence]
      cooldown: 10m
      steps:
        - {action: lower_lr, args: {factor: 0.5}}
"""


@dataclass
class Outcome:
    final: float
    lost: int
    recovery_s: float | None


def problem(seed: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 8, generator=gen)
    y = x @ torch.randn(8, 1, generator=gen) + 0.1 * torch.randn(256, 1, generator=gen)
    with_bias = torch.cat([x, torch.ones(256, 1)], 1)
    top = float(torch.linalg.eigvalsh(2 * with_bias.T @ with_bias / 256).max())
    return x, y, 1.02 * 2 / top


def train(seed: int, steps: int, step_s: float, run: stepwatch.Run | None) -> Outcome:
    x, y, lr = problem(seed)
    torch.manual_seed(seed)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    ctl = control(run, optimizer=optimizer, interval_s=0.05) if run is not None else None
    losses, times = [], []
    try:
        for step in range(steps):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            times.append(time.monotonic())
            if run is not None:
                run.log({"loss": losses[-1]}, step=step)
            time.sleep(step_s)
    finally:
        if ctl is not None:
            ctl.close()
    return judge(losses, times)


def judge(losses: list[float], times: list[float]) -> Outcome:
    """Steps lost and recovery time, against the best loss reached before the divergence."""
    best = math.inf
    onset = None
    for i, value in enumerate(losses):
        if not value > 1.5 * best:
            if onset is None:
                best = min(best, value)
            continue
        onset = i if onset is None else onset
    if onset is None:
        return Outcome(losses[-1], 0, 0.0)
    lost = sum(1 for v in losses[onset:] if not v <= 1.5 * best)
    back = next((i for i in range(onset, len(losses)) if losses[i] <= best), None)
    recovery = None if back is None else times[back] - times[onset]
    return Outcome(losses[-1], lost, recovery)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--step-s", type=float, default=0.005, help="pace of a training step")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, port = Path(tmp), free_port()
        rules = home / "rules.yaml"
        rules.write_text(RULES)
        log = home / "collector.log"
        proc = start_collector(home / "store.duckdb", port, log, "--rules", str(rules))
        try:
            print(f"{'seed':>4} {'stepwatch':>9} {'final loss':>12} {'steps lost':>10} "
                  f"{'recovery':>9}")  # fmt: skip
            for seed in args.seeds:
                for steered in (False, True):
                    run = None
                    if steered:
                        run = stepwatch.Run(
                            project="bench-closed-loop", run_id=f"seed-{seed}",
                            server=f"http://127.0.0.1:{port}", dir=home / "spool",
                            flush_interval_s=0.1, heartbeat_s=None,
                        )  # fmt: skip
                    try:
                        got = train(seed, args.steps, args.step_s, run)
                    finally:
                        if run is not None:
                            run.finish()
                    recovery = "never" if got.recovery_s is None else f"{got.recovery_s:.2f}s"
                    print(f"{seed:>4} {'on' if steered else 'off':>9} {got.final:>12.4g} "
                          f"{got.lost:>10} {recovery:>9}")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
