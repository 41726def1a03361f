"""The closed loop on a real PyTorch training, with the built-in rules and the README's policy:
the collector detects, its policy commands, the training process applies the command between
two steps, and the training recovers."""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

import stepwatch
from stepwatch.torch import Control, control, watch

Collector = Any  # the conftest's real collector (``.url``)

#: Bounds the tests' loops so that a broken loop fails instead of hanging.
MAX_STEPS = 4000

#: The policy of the README's "Training control" section, as a user copies it; the rules
#: that fire it are the built-in pack's.
POLICY = """
policies:
  observe_only: false          # true: decisions are only audited as "would have"
  max_actions_per_run: 5
  rules:
    - name: divergence
      kinds: [loss_divergence]
      cooldown: 10m
      steps:                   # each only while the alert still fires
        - {action: notify}
        - {action: lower_lr, args: {factor: 0.5}}
        - {after: 5m, action: stop, args: {timeout_s: 120}}
    - name: nonfinite
      kinds: [nonfinite]
      cooldown: 10m
      steps:
        - {action: rollback}
        - {action: skip_step, args: {steps: 100}}
"""

WARMUP = 300  # steps of learning-rate warm-up, to a peak past the stability limit
MEDIAN_OF = 20  # minibatch losses are noisy: divergence and recovery are judged on medians


def regression(seed: int) -> tuple[torch.Tensor, torch.Tensor, float, torch.nn.Linear]:
    """A fixed least-squares problem, the stability limit of full-batch SGD on it (2 / top
    curvature) and the seeded linear model the trainings fit to it."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(4096, 8, generator=gen) * torch.linspace(0.3, 1.5, 8)
    y = x @ torch.randn(8, 1, generator=gen) + 0.3 * torch.randn(4096, 1, generator=gen)
    with_bias = torch.cat([x, torch.ones(4096, 1)], 1)
    top = float(torch.linalg.eigvalsh(2 * with_bias.T @ with_bias / 4096).max())
    torch.manual_seed(1)
    return x, y, 2 / top, torch.nn.Linear(8, 1)


class Diverging:
    """Minibatch SGD whose warm-up ends 5 % past the stability limit: the loss falls for a
    few hundred steps, then blows up for good unless the rate comes down."""

    def __init__(self, seed: int = 0) -> None:
        self.x, self.y, limit, self.model = regression(seed)
        self.peak = 1.05 * limit
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.peak)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / WARMUP)
        )
        self.batches = torch.Generator().manual_seed(seed)
        self.losses: list[float] = []
        self.lowered: int | None = None  # first step whose update used a lowered rate
        self.best = math.inf  # the best median before it
        self.saved: dict[str, Any] = {}

    def step(self) -> float:
        step = len(self.losses)
        pick = torch.randint(0, len(self.x), (64,), generator=self.batches)
        self.optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(self.x[pick]), self.y[pick])
        loss.backward()
        self.optimizer.step()
        scheduled = self.peak * min(1.0, (step + 1) / WARMUP)
        if self.lowered is None and self.optimizer.param_groups[0]["lr"] < 0.99 * scheduled:
            self.lowered = step
            self.best = min(self.median(i) for i in range(MEDIAN_OF, step))
        self.scheduler.step()
        self.losses.append(loss.item())
        return self.losses[-1]

    def median(self, end: int) -> float:
        """The median of the losses of the ``MEDIAN_OF`` steps up to ``end`` (excluded)."""
        return statistics.median(self.losses[max(0, end - MEDIAN_OF) : end])

    def recovered(self) -> bool:
        """Whether the rate came down and the median is back within 20 % of the best."""
        return self.lowered is not None and self.median(len(self.losses)) < 1.2 * self.best

    def save(self, step: int) -> None:
        self.saved = copy.deepcopy(
            {"model": self.model.state_dict(), "opt": self.optimizer.state_dict()}
        )

    def load(self, step: int) -> None:
        self.model.load_state_dict(self.saved["model"])
        self.optimizer.load_state_dict(self.saved["opt"])


@pytest.fixture
def collector_with(collector_factory: Any, tmp_path: Path) -> Callable[[str], Collector]:
    def start(rules: str) -> Collector:
        path = tmp_path / "policies.yaml"
        path.write_text(rules)
        return collector_factory(extra_args=("--rules", str(path)))

    return start


@pytest.fixture
def run_on(tmp_path: Path) -> Iterator[Callable[[Collector], stepwatch.Run]]:
    runs: list[stepwatch.Run] = []

    def start(collector: Collector) -> stepwatch.Run:
        run = stepwatch.Run(
            project="closed-loop", server=collector.url, dir=tmp_path / "spool",
            flush_interval_s=0.1, heartbeat_s=None,
        )  # fmt: skip
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.finish()


def events(url: str, run: str, kind: str) -> list[dict[str, Any]]:
    params: dict[str, str | int] = {"run": run, "kind": kind, "limit": 1000}
    found: list[dict[str, Any]] = httpx.get(
        f"{url}/api/v1/events", params=params, timeout=10
    ).json()
    return found


def applied(ctl: Control, action: str) -> list[str]:
    return [o.result for c, o in ctl.controller.applied if c.action == action]


def test_the_policy_is_the_readmes() -> None:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    assert POLICY.lstrip() in readme.read_text()


def test_without_stepwatch_the_training_never_recovers() -> None:
    training = Diverging()
    for _ in range(WARMUP + 400):
        training.step()
    best = min(training.median(i) for i in range(MEDIAN_OF, WARMUP))
    assert best < 0.2
    assert training.median(len(training.losses)) > 100 * best  # blown up, and it stays so


def test_the_built_in_rules_and_the_readme_policy_halve_a_diverging_rate_and_it_recovers(
    collector_with: Callable[[str], Collector], run_on: Callable[[Collector], stepwatch.Run]
) -> None:
    collector = collector_with(POLICY)
    run = run_on(collector)
    training = Diverging()
    with control(
        run, optimizer=training.optimizer, save=training.save, load=training.load,
        scheduler=training.scheduler, interval_s=0.05,
    ) as ctl:  # fmt: skip
        while len(training.losses) < MAX_STEPS:
            if len(training.losses) % 50 == 0:
                ctl.checkpoint()
            run.log({"loss": training.step()}, step=len(training.losses) - 1)
            time.sleep(0.005)  # a training step's pace, so the loop leaves the collector time
            if training.recovered():
                break
    assert applied(ctl, "lower_lr") == ["ok"] and training.lowered is not None
    assert training.optimizer.param_groups[0]["lr"] == pytest.approx(training.peak / 2)
    # it diverged before the rate came down, and came back to its best
    assert max(training.losses[: training.lowered]) > 10 * training.best
    assert all(math.isfinite(v) for v in training.losses)
    assert training.recovered()
    run.flush()
    alerts = wait_for(lambda: events(collector.url, run.id, "alert"), bool)
    fired = {(a["data"]["group"], a["data"]["rule"]) for a in alerts
             if a["data"]["kind"] == "loss_divergence"}  # fmt: skip
    assert fired and fired <= {("training", "loss_divergence"), ("training", "loss_blowup")}
    records = wait_for(lambda: events(collector.url, run.id, "audit"), lambda a: any(
        r["data"]["action"] == "command" and r["data"]["result"] == "ok" for r in a))  # fmt: skip
    decisions = [(r["data"]["action"], r["data"]["result"]) for r in records]
    assert ("policy", "ok") in decisions  # the notify step
    assert ("policy", "issued") in decisions
    assert ("command", "pending") in decisions and ("command", "ok") in decisions


def wait_for(fetch: Callable[[], Any], done: Callable[[Any], bool], timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = fetch()
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_a_nan_gradient_is_rolled_back_then_skipped_and_training_goes_on(
    collector_with: Callable[[str], Collector],
    run_on: Callable[[Collector], stepwatch.Run],
    tmp_path: Path,
) -> None:
    collector = collector_with(POLICY)
    run = run_on(collector)
    x, y, limit, model = regression(seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=limit / 4)
    saved: dict[int, dict[str, Any]] = {}

    def save(step: int) -> None:
        saved[step] = {"model": model.state_dict(), "opt": optimizer.state_dict()}
        saved[step] = {k: copy.deepcopy(v) for k, v in saved[step].items()}

    def load(step: int) -> None:
        model.load_state_dict(saved[step]["model"])
        optimizer.load_state_dict(saved[step]["opt"])

    losses: list[float] = []
    second_nan: int | None = None
    with (
        watch(model, optimizer, run),
        control(run, optimizer=optimizer, save=save, load=load, interval_s=0.05) as ctl,
    ):
        for step in range(MAX_STEPS):
            if step % 10 == 0:
                ctl.checkpoint(step)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            if step == 30 or (second_nan is None and applied(ctl, "skip_step")):
                model.weight.grad[0, 0] = float("nan")  # type: ignore[index]
                second_nan = step if step != 30 else None
            optimizer.step()
            losses.append(loss.item())
            run.log({"loss": losses[-1]}, step=step)
            time.sleep(0.005)
            if second_nan is not None and step > second_nan + 50:
                break
    assert applied(ctl, "rollback") == ["ok"] and applied(ctl, "skip_step") == ["ok"]
    assert not math.isfinite(losses[32])  # the first NaN poisoned the weights
    assert second_nan is not None and ctl.skipped == [second_nan]  # the second was dropped
    assert all(math.isfinite(v) for v in losses[second_nan:])
    assert losses[-1] < min(losses[:30])
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
