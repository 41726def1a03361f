"""Hugging Face log keys as stepwatch metric names.

``loss``, ``learning_rate`` and ``grad_norm`` become ``train.loss``, ``train.lr``
and ``train.grad_norm``; ``eval_<x>`` becomes ``eval.<x>``; every other number is
kept under ``hf.<key>`` (``hf.epoch``, ``hf.train_runtime``) so that it never
collides with the vocabulary (the final ``train_loss`` average is not ``train.loss``).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping

__all__ = ["hf_metrics", "hf_name"]

_NAMES = {"loss": "train.loss", "learning_rate": "train.lr", "grad_norm": "train.grad_norm"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/-]")
_MAX = 190  # metric names are at most 200 characters


def hf_name(key: str) -> str:
    """The metric name for one Trainer log key."""
    if key in _NAMES:
        return _NAMES[key]
    area, rest = ("eval", key[5:]) if key.startswith("eval_") else ("hf", key)
    return f"{area}.{_UNSAFE.sub('_', rest)[:_MAX]}"


def hf_metrics(logs: Mapping[str, object]) -> dict[str, float]:
    """The numbers among the Trainer's logs, under their metric names (strings are skipped)."""
    return {
        hf_name(key): float(value)
        for key, value in logs.items()
        if isinstance(value, numbers.Real) and not isinstance(value, bool)
    }
