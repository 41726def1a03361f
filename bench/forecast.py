"""Forecasts against how real trainings ended: final loss and ETA from 20 %, 30 % and 50 % of
each run, beside the baselines a user would reach for.

Run: python bench/forecast.py [--runs 10] [--seed S] [--steps 1500,3000]

Trains small PyTorch models on the CPU (an MLP of two 256-wide layers on a noisy teacher's
labels, AdamW, batches of 256), each with one learning-rate schedule (cosine, linear, WSD,
inverse-sqrt, constant, in turn) and one length, a real evaluation pass every 10 % of the run
and a checkpoint written (and synced) every 25 %. Every step's loss, learning rate and time
are kept. Then, cutting each run at 20/30/50 % of its planned steps, it forecasts from the cut
alone and compares with the end:

- final loss (mean training loss over the last 50 planned steps): the forecast with the
  schedule stated, the forecast with only the learning rate seen, the loss's last EMA, and a
  power law a + b·step^-c fitted to the loss seen; median relative error of each, and how
  often the forecasts' p10-p90 holds the truth;
- ETA (time from the cut to the last step): the forecast's, and the naive one (steps left ×
  the recent step time); median relative error, and the p10-p90's coverage.

The seed is drawn afresh unless given, and printed. Prints figures; passes or fails nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from stepwatch.predict import (
    FINAL_WINDOW,
    LossLaw,
    LrSchedule,
    forecast_eta,
    forecast_final_loss,
)

KINDS = ("cosine", "linear", "wsd", "inv_sqrt", "constant")
CUTS = (0.2, 0.3, 0.5)
DIM, CLASSES, BATCH, WIDTH = 32, 10, 256, 256


@dataclass
class Recorded:
    """One training run: its schedule and every step's loss, learning rate and end time."""

    schedule: LrSchedule
    loss: np.ndarray
    lr: np.ndarray
    ts: np.ndarray

    @property
    def final(self) -> float:
        return float(self.loss[-FINAL_WINDOW:].mean())


def _teacher(gen: torch.Generator) -> nn.Module:
    net = nn.Sequential(nn.Linear(DIM, 64), nn.Tanh(), nn.Linear(64, CLASSES))
    for p in net.parameters():
        with torch.no_grad():
            p.copy_(torch.randn(p.shape, generator=gen) * 1.5)
    return net


def _batch(teacher: nn.Module, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and labels drawn from the teacher's softmax: a loss floor no model passes."""
    x = torch.randn(n, DIM, generator=gen)
    with torch.no_grad():
        probs = torch.softmax(teacher(x), dim=1)
    return x, torch.multinomial(probs, 1, generator=gen).squeeze(1)


def train(schedule: LrSchedule, seed: int, workdir: Path) -> Recorded:
    """Train one run to its planned steps, pausing for evaluation and checkpoints."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    teacher = _teacher(gen)
    model = nn.Sequential(nn.Linear(DIM, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
                          nn.Linear(WIDTH, CLASSES))  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=schedule.peak_lr, weight_decay=0.01)
    total = schedule.total_steps
    rates = schedule.lr(np.arange(total))
    held_x, held_y = _batch(teacher, 20_000, gen)
    loss_of, ts = np.empty(total), np.empty(total)
    for step in range(total):
        for group in opt.param_groups:
            group["lr"] = float(rates[step])
        x, y = _batch(teacher, BATCH, gen)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_of[step] = loss.item()
        if step and step % (total // 10) == 0:  # evaluation
            with torch.no_grad():
                for _ in range(2):
                    nn.functional.cross_entropy(model(held_x), held_y)
        if step and step % (total // 4) == 0:  # checkpoint
            path = workdir / f"ckpt-{seed}.pt"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
            with path.open("rb") as f:
                os.fsync(f.fileno())
        ts[step] = time.time()
    return Recorded(schedule, loss_of, rates, ts)


def _ema(loss: np.ndarray, half_life: float = 50.0) -> float:
    alpha, level = 1 - 0.5 ** (1 / half_life), float(loss[0])
    for v in loss[1:].tolist():
        level += alpha * (v - level)
    return level


def _power_law(steps: np.ndarray, loss: np.ndarray, total: int) -> float:
    """a + b·step^-c fitted to the loss seen (past its first tenth), at the last 50 steps."""
    keep = steps >= steps[-1] // 10
    s = steps[keep].astype(float) + 1
    law = LossLaw.fit(s, np.zeros_like(s), loss[keep])
    last = np.arange(total - FINAL_WINDOW, total, dtype=float) + 1
    return float(law.loss(last, np.zeros_like(last)).mean())


@dataclass
class Scores:
    """Per method, the relative errors (and interval hits) over runs at one cut."""

    errors: dict[str, list[float]]
    held: dict[str, list[bool]]

    def add(self, method: str, value: float, truth: float, lo: float = 0, hi: float = 0) -> None:
        self.errors.setdefault(method, []).append(abs(value / truth - 1))
        if hi > lo:
            self.held.setdefault(method, []).append(lo <= truth <= hi)


def score(runs: list[Recorded], cut: float) -> Scores:
    out = Scores({}, {})
    for run in runs:
        total = run.schedule.total_steps
        n = int(total * cut)
        steps = np.arange(n)
        stated = forecast_final_loss(steps, run.loss[:n], total, schedule=run.schedule)
        seen = forecast_final_loss(steps, run.loss[:n], total, lr=(steps, run.lr[:n]))
        eta = forecast_eta(steps, run.ts[:n], total)
        assert stated is not None and seen is not None and eta is not None
        out.add("loss: schedule stated", stated.p50, run.final, stated.p10, stated.p90)
        out.add("loss: rate seen only", seen.p50, run.final, seen.p10, seen.p90)
        out.add("loss: last EMA", _ema(run.loss[:n]), run.final)
        out.add("loss: power law in steps", _power_law(steps, run.loss[:n], total), run.final)
        truth = float(run.ts[-1] - run.ts[n - 1])
        out.add("eta: forecast", eta.eta_s, truth, eta.eta_s_p10, eta.eta_s_p90)
        out.add("eta: naive", eta.naive_s, truth)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--steps", default="1500,3000", help="run lengths, taken in turn")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(3), "little")
    lengths = [int(v) for v in args.steps.split(",")]
    torch.set_num_threads(1)
    print(f"forecast bench: {args.runs} CPU trainings, seed {seed}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="stepwatch-forecast-") as tmp:
        for i in range(args.runs):
            kind, total = KINDS[i % len(KINDS)], lengths[(i // len(KINDS)) % len(lengths)]
            decay = total * 8 // 10 if kind == "wsd" else None
            schedule = LrSchedule(kind, 3e-3, total, total // 20, 1e-4, decay)
            began = time.perf_counter()
            runs.append(train(schedule, seed + i, Path(tmp)))
            took = time.perf_counter() - began
            print(f"  run {i}: {kind:<8} {total:>5} steps, final loss "
                  f"{runs[-1].final:.4f}, {took:.1f} s")  # fmt: skip
    for cut in CUTS:
        scores = score(runs, cut)
        print(f"\nfrom {cut:.0%} of each run ({len(runs)} runs)")
        print(f"{'method':<28} {'median rel. error':>18} {'p10-p90 holds truth':>20}")
        for method, errors in scores.errors.items():
            held = scores.held.get(method)
            share = f"{sum(held)}/{len(held)}" if held else "-"
            print(f"{method:<28} {statistics.median(errors):>17.2%} {share:>20}")


if __name__ == "__main__":
    main()
