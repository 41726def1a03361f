"""The closed loop as a user gets it: the built-in rules and the README's policy on a real
training whose learning rate is too high.

Run: python bench/closed_loop.py [--seeds 0 1 2] [--peak 1.05] [--step-s 0.02]
       [--rules FILE] [--poll-s 1] [--flush-s 1]

Starts ``python -m stepwatch.server`` with the built-in pack and a rule file holding only
the policy the README documents (halve the learning rate on ``loss_divergence``; roll back,
then skip non-finite updates, on ``nonfinite``); ``--rules`` adds a rule file of your own
(a rule variant to compare). Each seed trains a least-squares model by minibatch SGD whose
learning-rate warm-up ends ``--peak`` times past the full batch's stability limit, so the
loss falls, then diverges near the warm-up's end; every step is paced to ``--step-s``. Each
seed runs twice, alone and with ``stepwatch.torch.control`` (SDK defaults: flush and poll
every second), and prints per run: the step where the divergence starts, the steps and
seconds from there to the collector's first ``loss_divergence`` alert and to the halved
learning rate taking effect, how far the loss rose (its highest value over the best
median), whether it recovered (the median back within 10 % of that best) and the final loss.

The divergence's start and the recovery are judged on the median of the last 20 losses
(minibatch losses are noisy) independently of the rule: the start is the last step whose
median stood within 10 % of the best median before the median first doubled. Prints
figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch
from _collector import free_port, start_collector

import stepwatch
from stepwatch.torch import control

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_policy() -> str:
    """The policy of the README's "Training control" section, as a user copies it."""
    text = README.read_text()
    start = text.index("```yaml\npolicies:") + len("```yaml\n")
    return text[start : text.index("```", start)]


MEDIAN_OF = 20  # losses in the median that judges start and recovery
WARMUP = 300  # steps of the learning-rate warm-up
AFTER = 700  # steps trained after the warm-up


@dataclass
class Curve:
    """What one training logged: its losses, when each step ended, and the first step whose
    update used a lowered learning rate (None: none did)."""

    losses: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    lowered: int | None = None


@dataclass
class Outcome:
    start: int | None  # step where the divergence starts (None: it did not)
    rose: float  # highest loss from the start on, over the best median before it
    recovered: int | None  # first step after the start whose median is back near the best
    final: float


def problem(seed: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Inputs, targets and the full batch's stability limit of plain SGD (2 / top curvature)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(4096, 8, generator=gen) * torch.linspace(0.3, 1.5, 8)
    y = x @ torch.randn(8, 1, generator=gen) + 0.3 * torch.randn(4096, 1, generator=gen)
    with_bias = torch.cat([x, torch.ones(4096, 1)], 1)
    return x, y, 2 / float(torch.linalg.eigvalsh(2 * with_bias.T @ with_bias / 4096).max())


class Training:
    """Minibatch SGD on one seed's problem, its warm-up ending ``peak`` times the limit."""

    def __init__(self, seed: int, peak: float) -> None:
        self.x, self.y, limit = problem(seed)
        torch.manual_seed(seed)
        self.model = torch.nn.Linear(8, 1)
        self.peak = peak * limit
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.peak)
        self.warm = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / WARMUP)
        )
        self.batches = torch.Generator().manual_seed(seed)
        self.saved: dict[str, Any] = {}
        self.curve = Curve()

    def step(self) -> float:
        step = len(self.curve.losses)
        pick = torch.randint(0, len(self.x), (64,), generator=self.batches)
        self.optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(self.x[pick]), self.y[pick])
        loss.backward()
        self.optimizer.step()
        scheduled = self.peak * min(1.0, (step + 1) / WARMUP)
        if self.curve.lowered is None and self.optimizer.param_groups[0]["lr"] < 0.99 * scheduled:
            self.curve.lowered = step
        self.warm.step()
        self.curve.losses.append(loss.item())
        self.curve.times.append(time.time())
        return self.curve.losses[-1]

    def save(self, step: int) -> None:
        self.saved = {"model": copy.deepcopy(self.model.state_dict()),
                      "opt": copy.deepcopy(self.optimizer.state_dict())}  # fmt: skip

    def load(self, step: int) -> None:
        self.model.load_state_dict(self.saved["model"])
        self.optimizer.load_state_dict(self.saved["opt"])


def train(seed: int, args: argparse.Namespace, run: stepwatch.Run | None) -> Curve:
    """One paced training; with a run, steered by the collector through ``control``."""
    training = Training(seed, args.peak)
    ctl = None
    if run is not None:
        ctl = control(
            run, optimizer=training.optimizer, save=training.save, load=training.load,
            scheduler=training.warm, interval_s=args.poll_s,
        )  # fmt: skip
    try:
        for step in range(WARMUP + AFTER):
            if ctl is not None and step % 50 == 0:
                ctl.checkpoint(step)
            loss = training.step()
            if run is not None:
                run.log({"loss": loss}, step=step)
            time.sleep(args.step_s)
    finally:
        if ctl is not None:
            ctl.close()
    return training.curve


def judge(curve: Curve) -> Outcome:
    """Start, rise and recovery of the divergence on the median of the last losses."""
    losses = curve.losses
    med = [_median(losses[max(0, i - MEDIAN_OF + 1) : i + 1]) for i in range(len(losses))]
    best, start = math.inf, None
    for i, m in enumerate(med[MEDIAN_OF:], MEDIAN_OF):
        if m > 2 * best:
            break
        best = min(best, m)
        start = i if m <= 1.1 * best else start
    else:
        return Outcome(None, 1.0, None, losses[-1])
    rose = max((v for v in losses[start:] if not math.isnan(v)), default=math.inf) / best
    back = next((i for i in range(start + MEDIAN_OF, len(med)) if med[i] <= 1.1 * best), None)
    return Outcome(start, rose, back, losses[-1])


def _median(values: list[float]) -> float:
    finite = [v if math.isfinite(v) else math.inf for v in values]
    return statistics.median(finite)


def first_alert(url: str, run: str) -> float | None:
    """Data time of the first firing ``loss_divergence`` alert of ``run``."""
    params: dict[str, str | int] = {"run": run, "kind": "alert", "limit": 1000}
    events = httpx.get(f"{url}/api/v1/events", params=params, timeout=10).json()
    fired = [e["ts"] for e in events if e["data"]["state"] == "firing"
             and e["data"]["kind"] == "loss_divergence"]  # fmt: skip
    return min(fired, default=None)


def _at(curve: Curve, start: int | None, step: int | None) -> str:
    if start is None or step is None:
        return "-"
    return f"{step - start} / {curve.times[step] - curve.times[start]:.1f}s"


def _report(seed: int, steered: bool, curve: Curve, alert_ts: float | None) -> None:
    got = judge(curve)
    alert = None if alert_ts is None else next(
        (i for i, t in enumerate(curve.times) if t >= alert_ts), len(curve.times) - 1)  # fmt: skip
    recovered = "never" if got.recovered is None else f"step {got.recovered}"
    print(f"{seed:>4} {'on' if steered else 'off':>4} {'-' if got.start is None else got.start:>6} "
          f"{_at(curve, got.start, alert):>14} {_at(curve, got.start, curve.lowered):>14} "
          f"{got.rose:>9.3g}x {recovered:>10} {got.final:>10.3g}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--peak", type=float, default=1.05, help="peak lr / stability limit")
    parser.add_argument("--step-s", type=float, default=0.02, help="pace of a training step")
    parser.add_argument("--rules", type=Path, help="a rule file to add to the built-in pack")
    parser.add_argument("--poll-s", type=float, default=1.0, help="control()'s interval_s")
    parser.add_argument("--flush-s", type=float, default=1.0, help="the run's flush_interval_s")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, port = Path(tmp), free_port()
        (home / "policy.yaml").write_text(readme_policy())
        rules = ["--rules", str(home / "policy.yaml")]
        rules += ["--rules", str(args.rules)] if args.rules else []
        url = f"http://127.0.0.1:{port}"
        proc = start_collector(home / "store.duckdb", port, home / "collector.log", *rules)
        try:
            print(f"{'seed':>4} {'sw':>4} {'start':>6} {'alert (steps/s)':>14} {'lr halved':>14} "
                  f"{'loss rose':>10} {'recovered':>10} {'final':>10}")  # fmt: skip
            for seed in args.seeds:
                _report(seed, False, train(seed, args, None), None)
                run = stepwatch.Run(project="bench-closed-loop", run_id=f"seed-{seed}",
                                    server=url, dir=home / "spool",
                                    flush_interval_s=args.flush_s)  # fmt: skip
                try:
                    curve = train(seed, args, run)
                finally:
                    run.finish()
                _report(seed, True, curve, first_alert(url, run.id))
        finally:
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
