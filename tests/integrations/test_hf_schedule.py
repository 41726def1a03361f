"""The lr_schedule stated from a Trainer's arguments gives the rate Hugging Face's own
scheduler gives at every step; shapes the format does not hold state nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from stepwatch.integrations._hf_schedule import hf_lr_schedule
from stepwatch.predict import LrSchedule

STEPS, PEAK = 400, 2e-3


def _args(tmp_path: Path, kind: str, **more: Any) -> Any:
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=str(tmp_path), learning_rate=PEAK, lr_scheduler_type=kind, report_to=[],
        use_cpu=True, max_steps=STEPS, **more,
    )  # fmt: skip


def _hf_rates(args: Any) -> np.ndarray:
    """The rate each step trains at under the Trainer's own scheduler."""
    from transformers import get_scheduler

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=PEAK)
    scheduler = get_scheduler(
        args.lr_scheduler_type, opt, num_warmup_steps=args.get_warmup_steps(STEPS),
        num_training_steps=STEPS, scheduler_specific_kwargs=args.lr_scheduler_kwargs,
    )  # fmt: skip
    rates = []
    for _ in range(STEPS):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    return np.array(rates)


@pytest.mark.parametrize(
    ("kind", "more", "stated"),
    [
        ("linear", {"warmup_steps": 40}, "linear"),
        ("cosine", {"warmup_steps": 0.1}, "cosine"),
        ("cosine_with_min_lr", {"warmup_steps": 20, "lr_scheduler_kwargs": {"min_lr": 1e-4}},
         "cosine"),
        ("constant", {}, "constant"),
        ("constant_with_warmup", {"warmup_steps": 30}, "constant"),
        ("inverse_sqrt", {"warmup_steps": 50}, "inv_sqrt"),
        ("warmup_stable_decay", {"warmup_steps": 40, "lr_scheduler_kwargs": {
            "num_decay_steps": 100, "num_stable_steps": 200, "min_lr_ratio": 0.1}}, "wsd"),
        ("warmup_stable_decay", {"warmup_steps": 40, "lr_scheduler_kwargs": {
            "num_decay_steps": 100, "decay_type": "linear"}}, "wsd"),
    ],
)  # fmt: skip
@pytest.mark.filterwarnings("ignore:Both num_training_steps and num_stable_steps")
def test_the_stated_schedule_gives_the_trainers_rate_at_every_step(
    tmp_path: Path, kind: str, more: dict[str, Any], stated: str
) -> None:
    args = _args(tmp_path, kind, **more)
    config = hf_lr_schedule(args, STEPS)
    assert config is not None and config["type"] == stated
    ours = LrSchedule.from_config(config).lr(np.arange(STEPS))
    # a WSD warm-up from its floor is stated as one from 0 (forecasts leave warm-up out)
    start = config["warmup_steps"] if more.get("lr_scheduler_kwargs", {}).get("min_lr_ratio") else 0
    np.testing.assert_allclose(ours[start:], _hf_rates(args)[start:], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize(
    ("kind", "more"),
    [
        ("cosine_with_restarts", {"lr_scheduler_kwargs": {"num_cycles": 3}}),
        ("polynomial", {"lr_scheduler_kwargs": {"power": 2.0}}),
        ("reduce_lr_on_plateau", {"eval_strategy": "steps"}),
        ("inverse_sqrt", {"warmup_steps": 10, "lr_scheduler_kwargs": {"timescale": 500}}),
        ("warmup_stable_decay", {"lr_scheduler_kwargs": {"num_decay_steps": 50,
                                                          "decay_type": "1-sqrt"}}),
    ],
)  # fmt: skip
def test_a_shape_the_format_does_not_hold_states_nothing(
    tmp_path: Path, kind: str, more: dict[str, Any]
) -> None:
    assert hf_lr_schedule(_args(tmp_path, kind, **more), STEPS) is None
