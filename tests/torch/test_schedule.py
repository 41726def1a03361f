"""The lr_schedule a PyTorch scheduler follows, read by running a copy of it: each shape the
format holds is named with its parameters; others state nothing; the real one never moves."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from stepwatch.predict import LrSchedule
from stepwatch.torch._schedule import stated_schedule

TOTAL, PEAK, WARMUP = 300, 2e-3, 30

Make = Callable[[torch.optim.Optimizer], Any]


def _warm_cosine(opt: torch.optim.Optimizer) -> Any:
    """Warm-up then cosine to 0, as Hugging Face's helper writes it (a LambdaLR)."""

    def factor(s: int) -> float:
        if s < WARMUP:
            return s / WARMUP
        return 0.5 * (1 + math.cos(math.pi * (s - WARMUP) / (TOTAL - WARMUP)))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def _wsd(opt: torch.optim.Optimizer) -> Any:
    def factor(s: int) -> float:
        return s / WARMUP if s < WARMUP else 1.0 if s < 200 else 1 - 0.9 * (s - 200) / 100

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def _made(make: Make) -> tuple[Any, torch.optim.Optimizer]:
    """A scheduler ``make`` makes over an AdamW of a small model, and that optimizer."""
    opt = torch.optim.AdamW(torch.nn.Linear(4, 2).parameters(), lr=PEAK)
    return make(opt), opt


@pytest.mark.parametrize(
    ("make", "kind", "fields"),
    [
        (_warm_cosine, "cosine", {"warmup_steps": WARMUP, "final_lr": 0.0}),
        (lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, TOTAL, eta_min=1e-4), "cosine",
         {"warmup_steps": 0, "final_lr": 1e-4}),
        (lambda o: torch.optim.lr_scheduler.LinearLR(o, 1.0, 0.1, total_iters=TOTAL), "linear",
         {"warmup_steps": 0, "final_lr": PEAK * 0.1}),
        (lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0), "constant", {}),
        (_wsd, "wsd", {"warmup_steps": WARMUP, "decay_start_step": 200, "decay_type": "linear",
                       "final_lr": PEAK * 0.1}),
    ],
)  # fmt: skip
def test_a_shape_the_format_holds_is_named_and_gives_the_same_rates(
    make: Make, kind: str, fields: dict[str, Any]
) -> None:
    scheduler, opt = _made(make)
    config = stated_schedule(scheduler, TOTAL)
    assert config is not None and config["type"] == kind
    for name, value in fields.items():
        assert config[name] == pytest.approx(value, abs=1e-12), name
    expected = []
    for _ in range(TOTAL):  # the real scheduler, run after the reading
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    ours = LrSchedule.from_config(config).lr(np.arange(TOTAL))
    np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=50, gamma=0.5),
        lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=PEAK, total_steps=TOTAL),
        lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.99),
    ],
)
def test_a_shape_the_format_does_not_hold_states_nothing(make: Make) -> None:
    scheduler, _ = _made(make)
    assert stated_schedule(scheduler, TOTAL) is None


def test_reading_moves_neither_the_scheduler_nor_the_optimizer() -> None:
    scheduler, opt = _made(_warm_cosine)
    before = (scheduler.last_epoch, opt.param_groups[0]["lr"], scheduler.get_last_lr())
    params = [p.detach().clone() for g in opt.param_groups for p in g["params"]]
    assert stated_schedule(scheduler, TOTAL) is not None
    assert (scheduler.last_epoch, opt.param_groups[0]["lr"], scheduler.get_last_lr()) == before
    assert scheduler.optimizer is opt and not opt.state  # no step was taken on it
    now = [p for g in opt.param_groups for p in g["params"]]
    assert all(torch.equal(a, b) for a, b in zip(params, now, strict=True))
