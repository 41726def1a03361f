"""The closed loop on a real PyTorch training: the collector detects, its policy commands, the
training process applies the command between two steps, and the training recovers."""

from __future__ import annotations

import math
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

DIVERGENCE_RULES = """
groups:
  - name: closed_loop
    rules:
      - alert: fast_divergence
        kind: loss_divergence
        signal: {metric: train.loss, by: [run]}
        detector: {type: rise, rise: 0.5, halflife: 3, window: 500}
        for: 3 samples
        severity: critical
policies:
  max_actions_per_run: 3
  rules:
    - name: calm_divergence
      kinds: [loss_divergence]
      cooldown: 10m
      steps:
        - {action: notify}
        - {action: lower_lr, args: {factor: 0.5}}
"""

NONFINITE_RULES = """
policies:
  rules:
    - name: nonfinite_rescue
      kinds: [nonfinite]
      cooldown: 10m
      steps:
        - {action: rollback}
        - {action: skip_step, args: {steps: 100000}}
"""


def regression(seed: int) -> tuple[torch.Tensor, torch.Tensor, float, torch.nn.Linear]:
    """A fixed least-squares problem, a learning rate 2 % past where SGD stays stable, and the
    seeded linear model both trainings fit to it."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 8, generator=gen)
    y = x @ torch.randn(8, 1, generator=gen) + 0.1 * torch.randn(256, 1, generator=gen)
    with_bias = torch.cat([x, torch.ones(256, 1)], 1)
    top = float(torch.linalg.eigvalsh(2 * with_bias.T @ with_bias / 256).max())
    torch.manual_seed(1)
    return x, y, 1.02 * 2 / top, torch.nn.Linear(8, 1)


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


def audit(url: str, run: str) -> list[dict[str, Any]]:
    params: dict[str, str | int] = {"run": run, "kind": "audit", "limit": 1000}
    found: list[dict[str, Any]] = httpx.get(
        f"{url}/api/v1/events", params=params, timeout=10
    ).json()
    return found


def applied(ctl: Control, action: str) -> list[str]:
    return [o.result for c, o in ctl.controller.applied if c.action == action]


def test_a_diverging_run_gets_its_learning_rate_lowered_and_recovers(
    collector_with: Callable[[str], Collector], run_on: Callable[[Collector], stepwatch.Run]
) -> None:
    collector = collector_with(DIVERGENCE_RULES)
    run = run_on(collector)
    x, y, lr, model = regression(seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses: list[float] = []
    rates: list[float] = []  # the rate each step's update used
    with control(run, optimizer=optimizer, interval_s=0.05) as ctl:
        while len(losses) < MAX_STEPS:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            rates.append(optimizer.param_groups[0]["lr"])
            run.log({"loss": losses[-1]}, step=len(losses) - 1)
            time.sleep(0.005)  # a training step's pace, so the loop leaves the collector time
            if applied(ctl, "lower_lr") and losses[-1] < 0.05:
                break
    assert applied(ctl, "lower_lr") == ["ok"]
    assert optimizer.param_groups[0]["lr"] == pytest.approx(lr / 2)
    lowered = rates.index(lr / 2)
    best = min(losses[:10])
    assert max(losses[:lowered]) > 1.5 * best  # the loss diverged (as the rule defines it)
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.05 < best  # and recovered, below anything before
    run.flush()
    records = wait_for(lambda: audit(collector.url, run.id), lambda a: any(
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
    collector = collector_with(NONFINITE_RULES)
    run = run_on(collector)
    x, y, lr, model = regression(seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr / 4)
    saved: dict[int, dict[str, Any]] = {}

    def save(step: int) -> None:
        saved[step] = {"model": model.state_dict(), "opt": optimizer.state_dict()}
        saved[step] = {k: _copy(v) for k, v in saved[step].items()}

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


def _copy(state: Any) -> Any:
    if isinstance(state, torch.Tensor):
        return state.clone()
    if isinstance(state, dict):
        return {k: _copy(v) for k, v in state.items()}
    if isinstance(state, list):
        return [_copy(v) for v in state]
    return state
