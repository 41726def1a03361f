"""The ``lr_schedule`` a Hugging Face Trainer's arguments state, for the run's config: the
forecasts then know the learning rate of the steps still to come. A shape the format does not
hold (restarts, polynomial, on plateau, a custom timescale) states nothing, and forecasts go
by the rate seen; a WSD warm-up that starts from its floor (``min_lr_ratio``) is stated as one
from 0, which forecasts leave out anyway."""

from __future__ import annotations

from typing import Any

__all__ = ["hf_lr_schedule"]


def hf_lr_schedule(args: Any, max_steps: int) -> dict[str, Any] | None:
    """The schedule of ``TrainingArguments`` over ``max_steps``, or None."""
    kind = str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type))
    kwargs: dict[str, Any] = dict(getattr(args, "lr_scheduler_kwargs", None) or {})
    peak = float(args.learning_rate)
    warmup = int(args.get_warmup_steps(max_steps))
    base: dict[str, Any] = {"peak_lr": peak, "warmup_steps": warmup, "total_steps": max_steps}
    if max_steps <= 0 or warmup >= max_steps or kwargs.get("num_cycles", 0.5) != 0.5:
        return None
    if kind in ("linear", "cosine") and not kwargs:
        return {"type": kind, **base, "final_lr": 0.0}
    if kind in ("constant", "constant_with_warmup") and not kwargs:
        warmup = warmup if kind == "constant_with_warmup" else 0
        return {"type": "constant", **base, "warmup_steps": warmup, "final_lr": peak}
    if kind in ("cosine_with_min_lr", "cosine_warmup_with_min_lr"):
        floor = kwargs.get("min_lr", peak * float(kwargs.get("min_lr_rate", 0.0)))
        return {"type": "cosine", **base, "final_lr": float(floor)}
    if kind == "inverse_sqrt" and warmup > 0 and kwargs.get("timescale") in (None, warmup):
        return {"type": "inv_sqrt", **base, "final_lr": 0.0}
    if kind == "warmup_stable_decay":
        return _wsd(base, kwargs, max_steps)
    return None


def _wsd(base: dict[str, Any], kwargs: dict[str, Any], max_steps: int) -> dict[str, Any] | None:
    """Warm-up, stable, decay: the decay's length and shape from the scheduler's arguments."""
    warmup, decay_type = base["warmup_steps"], kwargs.get("decay_type", "cosine")
    decay = kwargs.get("num_decay_steps")
    if decay is None or decay_type not in ("linear", "cosine"):
        return None
    if kwargs.get("warmup_type", "linear") != "linear":
        return None
    stable = kwargs.get("num_stable_steps")
    stable = max_steps - warmup - int(decay) if stable is None else int(stable)
    end = warmup + stable + int(decay)
    return {
        **base,
        "type": "wsd",
        "total_steps": end,
        "decay_start_step": warmup + stable,
        "decay_type": decay_type,
        "final_lr": base["peak_lr"] * float(kwargs.get("min_lr_ratio", 0.0)),
    }
