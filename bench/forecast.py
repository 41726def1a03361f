"""Forecasts against how real trainings ended: final loss and ETA from 20 %, 30 % and 50 % of
each run, beside the baselines a user would reach for.

Run: python bench/forecast.py [--runs 10] [--pushed 20] [--seed S] [--steps 1500,3000]
                               [--batch 1024] [--task lm|teacher] [--fit]

Trains small PyTorch models on the CPU (``--task``, see _forecast_tasks.py: by default a
language model on real text; AdamW, batches of 1,024: steps of about 10 ms, long enough that a
step's time is the training's rather than the shared machine's jitter), each with one
learning-rate schedule (cosine, linear, WSD, inverse-sqrt, constant, in turn) and one length,
a real evaluation pass every 10 % of the run and a checkpoint written (and synced) every 25 %.
Every step's loss, learning rate and time are kept. Then, cutting each run at 20/30/50 % of
its planned steps, it forecasts from the cut alone and compares with the end:

- final loss (mean training loss over the last 50 planned steps): the forecast with the
  schedule stated, the same lent the law of the project's finished runs (here: the other
  scheduled runs, each run left out of its own), the forecast with only the learning rate
  seen, the loss's last EMA, and a power law a + b·step^-c fitted to the loss seen; median
  relative error of each, and how often the forecasts' p10-p90 holds the truth;
- ETA (time from the cut to the last step): the forecast's, and the naive one (steps left ×
  the recent step time); median relative error, and the p10-p90's coverage;
- success: besides those runs, ``--pushed`` runs whose warm-up climbs to a rate drawn up to
  300 times the usual, some of which blow up. A run whose loss diverges (its recent mean
  ``DIVERGED`` times its best) is stopped there, as a training's guard would. The success
  probability of every run still going at the cut is scored against whether it reached its
  last step: Brier score and a reliability table. ``--fit`` prints the logistic's
  coefficients fitted on these runs instead (run it on seeds other than those reported).

The seed is drawn afresh unless given, and printed. Prints figures; passes or fails nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from _forecast_tasks import TASKS, Task
from torch import nn

from stepwatch.predict import (
    DIVERGED,
    FINAL_WINDOW,
    CurveRisk,
    FinishedCurve,
    LossLaw,
    LrSchedule,
    ProjectLaw,
    fit_project_law,
    forecast_eta,
    forecast_final_loss,
    success_probability,
)

KINDS = ("cosine", "linear", "wsd", "inv_sqrt", "constant")
CUTS = (0.2, 0.3, 0.5)
#: Samples a step: steps of about 10 ms, long enough to time on a shared machine.
BATCH = 1024
TaskOf = Callable[[torch.Generator], Task]


@dataclass
class Recorded:
    """One training run: its schedule and every step's loss, learning rate and end time."""

    schedule: LrSchedule
    loss: np.ndarray
    lr: np.ndarray
    ts: np.ndarray

    @property
    def made_it(self) -> bool:
        """Whether it reached its last step (it was not stopped for diverging)."""
        return len(self.loss) == self.schedule.total_steps

    @property
    def final(self) -> float:
        return float(self.loss[-FINAL_WINDOW:].mean())


def train(
    task_of: TaskOf, schedule: LrSchedule, seed: int, workdir: Path, batch: int = BATCH
) -> Recorded:
    """Train one run of the task to its planned steps, pausing for evaluation and checkpoints."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    task = task_of(gen)
    model = task.model()
    opt = torch.optim.AdamW(model.parameters(), lr=schedule.peak_lr, weight_decay=0.01)
    total = schedule.total_steps
    rates = schedule.lr(np.arange(total))
    held_x, held_y = task.batch(20_000, gen)
    loss_of, ts = np.empty(total), np.empty(total)
    for step in range(total):
        for group in opt.param_groups:
            group["lr"] = float(rates[step])
        x, y = task.batch(batch, gen)
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
        if _diverged(loss_of[: step + 1]):
            return Recorded(schedule, loss_of[: step + 1], rates[: step + 1], ts[: step + 1])
    return Recorded(schedule, loss_of, rates, ts)


def _diverged(loss: np.ndarray) -> bool:
    """The guard's test, every 50 steps: the latest 50-step mean ``DIVERGED`` times the best."""
    if len(loss) % 50 or not np.isfinite(loss[-50:]).all():
        return not np.isfinite(loss[-1])
    means = loss.reshape(-1, 50).mean(axis=1)
    return bool(means[-1] >= DIVERGED * np.nanmin(means))


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


def project_laws(runs: list[Recorded]) -> list[ProjectLaw | None]:
    """For each run, the law of the others that made it: its project's finished runs."""
    curves = [FinishedCurve(r.lr, np.arange(len(r.loss)), r.loss) for r in runs]
    return [
        fit_project_law([c for j, (c, r) in enumerate(zip(curves, runs, strict=True))
                         if j != i and r.made_it])
        for i in range(len(runs))
    ]  # fmt: skip


def score(runs: list[Recorded], laws: list[ProjectLaw | None], cut: float) -> Scores:
    out = Scores({}, {})
    for run, law in ((r, w) for r, w in zip(runs, laws, strict=True) if r.made_it):
        total = run.schedule.total_steps
        n = int(total * cut)
        steps = np.arange(n)
        stated = forecast_final_loss(steps, run.loss[:n], total, schedule=run.schedule)
        lent = forecast_final_loss(steps, run.loss[:n], total, schedule=run.schedule, prior=law)
        seen = forecast_final_loss(steps, run.loss[:n], total, lr=(steps, run.lr[:n]))
        eta = forecast_eta(steps, run.ts[:n], total)
        assert stated is not None and lent is not None and seen is not None and eta is not None
        out.add("loss: schedule stated", stated.p50, run.final, stated.p10, stated.p90)
        out.add("loss: + project's runs", lent.p50, run.final, lent.p10, lent.p90)
        out.add("loss: rate seen only", seen.p50, run.final, seen.p10, seen.p90)
        out.add("loss: last EMA", _ema(run.loss[:n]), run.final)
        out.add("loss: power law in steps", _power_law(steps, run.loss[:n], total), run.final)
        truth = float(run.ts[-1] - run.ts[n - 1])
        out.add("eta: forecast", eta.eta_s, truth, eta.eta_s_p10, eta.eta_s_p90)
        out.add("eta: naive", eta.naive_s, truth)
    return out


def _risk(run: Recorded, n: int) -> CurveRisk:
    """The curve's risk at step ``n``, the rate ahead from the run's schedule."""
    ahead = run.schedule.lr(np.arange(n - 1, run.schedule.total_steps))
    return CurveRisk.of(run.loss[:n], float(ahead[0]), float(ahead.max()))


def outcomes(runs: list[Recorded], cut: float) -> tuple[list[CurveRisk], list[bool]]:
    """Of the runs still going at ``cut``: the curve's risk there, and whether each made it."""
    alive = [r for r in runs if len(r.loss) > int(r.schedule.total_steps * cut)]
    return [_risk(r, int(r.schedule.total_steps * cut)) for r in alive], [r.made_it for r in alive]


def reliability(runs: list[Recorded]) -> None:
    """Brier score and a reliability table of the success probability, per cut."""
    for cut in CUTS:
        risks, made = outcomes(runs, cut)
        p = np.array([success_probability(r, (), 1.0, None) for r in risks])
        y = np.array(made, dtype=float)
        print(f"\nsuccess from {cut:.0%}: {len(y)} runs still going, {int(y.sum())} made it, "
              f"Brier {np.mean((p - y) ** 2):.3f} (always saying the base rate: "
              f"{np.mean((y.mean() - y) ** 2):.3f})")  # fmt: skip
        print(f"{'forecast':>12} {'runs':>6} {'mean forecast':>14} {'made it':>8}")
        for lo, hi in ((0, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 0.95), (0.95, 1.01)):
            inside = (p >= lo) & (p < hi)
            if inside.any():
                print(f"{f'{lo:.2f}-{min(hi, 1):.2f}':>12} {int(inside.sum()):>6} "
                      f"{p[inside].mean():>14.2f} {y[inside].mean():>8.2f}")  # fmt: skip


def fit(runs: list[Recorded]) -> None:
    """The logistic's coefficients (logit of failure) fitted on every cut's runs still going."""
    x, y = [], []
    for cut in CUTS:
        risks, made = outcomes(runs, cut)
        x += [r.features() for r in risks if not r.diverged]
        y += [not m for r, m in zip(risks, made, strict=True) if not r.diverged]
    xs, ys = np.array(x), np.array(y, dtype=float)
    coef, ridge = np.zeros(xs.shape[1]), 0.1 * np.eye(xs.shape[1])
    for _ in range(50):  # Newton's method, a small ridge keeping it finite when separable
        p = 1 / (1 + np.exp(-(xs @ coef)))
        hess = xs.T @ (xs * (p * (1 - p))[:, None]) + ridge
        coef -= np.linalg.solve(hess, xs.T @ (p - ys) + ridge @ coef)
    print(f"\nfitted on {len(ys)} cuts of runs still going, {int(ys.sum())} of which failed:")
    print("coefficients (const, rise, ahead, trend):", ", ".join(f"{c:.2f}" for c in coef))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--steps", default="1500,3000", help="run lengths, taken in turn")
    parser.add_argument("--pushed", type=int, default=20, help="runs whose rate climbs high")
    parser.add_argument("--batch", type=int, default=BATCH, help="samples a step")
    parser.add_argument("--task", choices=sorted(TASKS), default="lm", help="what they learn")
    parser.add_argument("--fit", action="store_true", help="fit the success logistic instead")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(3), "little")
    lengths = [int(v) for v in args.steps.split(",")]
    torch.set_num_threads(1)
    print(f"forecast bench: {args.runs} + {args.pushed} CPU trainings ({args.task}, batches of "
          f"{args.batch}), seed {seed}")  # fmt: skip
    runs = []
    with tempfile.TemporaryDirectory(prefix="stepwatch-forecast-") as tmp:
        for i in range(args.runs):
            kind, total = KINDS[i % len(KINDS)], lengths[(i // len(KINDS)) % len(lengths)]
            decay = total * 8 // 10 if kind == "wsd" else None
            schedule = LrSchedule(kind, 3e-3, total, total // 20, 1e-4, decay)
            began = time.perf_counter()
            runs.append(train(TASKS[args.task], schedule, seed + i, Path(tmp), args.batch))
            took = time.perf_counter() - began
            print(f"  run {i}: {kind:<8} {total:>5} steps, final loss "
                  f"{runs[-1].final:.4f}, {took:.1f} s")  # fmt: skip
        draw = np.random.default_rng(seed)
        for i in range(args.pushed):
            total = lengths[0]
            warmup, peak = int(total * draw.uniform(0.3, 0.6)), 3e-3 * 10 ** draw.uniform(0, 2.5)
            schedule = LrSchedule("cosine", peak, total, warmup, 1e-4)
            runs.append(
                train(TASKS[args.task], schedule, seed + args.runs + i, Path(tmp), args.batch)
            )
            ended = "made it" if runs[-1].made_it else f"diverged at step {len(runs[-1].loss)}"
            print(f"  pushed run {i}: peak rate {peak:.3g} after {warmup} steps, {ended}")
    if args.fit:
        fit(runs)
        return
    scheduled = runs[: args.runs]  # the pushed runs are there for the success figures
    laws = project_laws(scheduled)
    for cut in CUTS:
        scores = score(scheduled, laws, cut)
        print(f"\nfrom {cut:.0%} of each scheduled run ({len(scheduled)} runs)")
        print(f"{'method':<28} {'median rel. error':>18} {'p10-p90 holds truth':>20}")
        for method, errors in scores.errors.items():
            held = scores.held.get(method)
            share = f"{sum(held)}/{len(held)}" if held else "-"
            print(f"{method:<28} {statistics.median(errors):>17.2%} {share:>20}")
    reliability(runs)


if __name__ == "__main__":
    main()
