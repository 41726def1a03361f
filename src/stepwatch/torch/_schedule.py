"""The ``lr_schedule`` a PyTorch learning-rate scheduler follows, read by running a copy of it
over the planned steps (on a stand-in optimizer: the model's parameters are never copied) and
naming the shape its rates take, when the format holds it. Any scheduler can be read so,
a ``LambdaLR`` from Hugging Face's helpers included; one of another shape states nothing."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch

from ..predict import LrSchedule, ScheduleError

__all__ = ["stated_schedule"]

#: How closely a named shape must give the scheduler's rates, relative to its peak.
_TOLERANCE = 1e-6


def stated_schedule(scheduler: Any, total_steps: int) -> dict[str, Any] | None:
    """The ``lr_schedule`` of ``scheduler`` (stepped once an optimizer step, from where it
    stands) over ``total_steps``, or None when no shape of the format gives its rates."""
    rates = _rates(scheduler, total_steps)
    if rates is None or not np.all(np.isfinite(rates)) or rates.max() <= 0:
        return None
    for config in _candidates(rates):
        try:
            shape = LrSchedule.from_config(config)
        except ScheduleError:
            continue
        if np.max(np.abs(shape.lr(np.arange(total_steps)) - rates)) <= _TOLERANCE * rates.max():
            return config
    return None


def _rates(scheduler: Any, total_steps: int) -> np.ndarray | None:
    """The first group's rate at each step, from a copy of the scheduler driving a stand-in
    optimizer of one scalar per group."""
    optimizer = getattr(scheduler, "optimizer", None)
    if optimizer is None or total_steps <= 1:
        return None
    groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [torch.zeros(1)]}
              for g in optimizer.param_groups]  # fmt: skip
    stand_in = torch.optim.SGD(groups, lr=float(groups[0]["lr"]))
    # A scheduler made on it wraps its step() as schedulers expect of their optimizer's (else
    # the copy warns that the optimizer stepped after it); its first step set each group's
    # rate, so the real ones are put back.
    torch.optim.lr_scheduler.LambdaLR(stand_in, lambda _: 1.0)
    for mine, real in zip(stand_in.param_groups, optimizer.param_groups, strict=True):
        mine["lr"] = real["lr"]
    try:
        running = copy.deepcopy(scheduler, memo={id(optimizer): stand_in})
    except (TypeError, RuntimeError, copy.Error):
        return None
    rates = np.empty(total_steps)
    for step in range(total_steps):
        rates[step] = float(stand_in.param_groups[0]["lr"])
        stand_in.step()  # no gradients: nothing moves, but the scheduler sees a step taken
        running.step()
    return rates


def _candidates(rates: np.ndarray) -> list[dict[str, Any]]:
    """The configs of every shape the rates could take, with their parameters read off them."""
    total = len(rates)
    peak = float(rates.max())
    at_peak = np.flatnonzero(rates >= peak * (1 - _TOLERANCE))
    warmup, held_to = int(at_peak[0]), int(at_peak[-1])
    base = {"peak_lr": peak, "warmup_steps": warmup, "total_steps": total}
    last = total - 1
    t = (last - warmup) / max(total - warmup, 1)
    out: list[dict[str, Any]] = [{"type": "constant", **base, "final_lr": peak}]
    if t > 0:
        half = 0.5 * (1 + math.cos(math.pi * t))
        out.append({"type": "cosine", **base, "final_lr": _final(rates[-1], peak, half)})
        out.append({"type": "linear", **base, "final_lr": _final(rates[-1], peak, 1 - t)})
    if warmup > 0:
        out.append({"type": "inv_sqrt", **base, "final_lr": 0.0})
    start = held_to  # the decay's first step is its last at the peak
    if warmup < start < last:
        d = (last - start) / (total - start)
        for decay, kept in (("linear", 1 - d), ("cosine", 0.5 * (1 + math.cos(math.pi * d)))):
            final = _final(rates[-1], peak, kept)
            out.append({"type": "wsd", **base, "final_lr": final, "decay_start_step": start,
                        "decay_type": decay})  # fmt: skip
    return out


def _final(last: float, peak: float, kept: float) -> float:
    """The final rate of a decay that keeps ``kept`` of the way from it to the peak at the
    last step, given the rate there; never below 0."""
    return max((float(last) - peak * kept) / (1 - kept), 0.0) if kept < 1 else float(last)
