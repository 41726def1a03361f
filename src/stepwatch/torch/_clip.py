"""Reusing the gradient norm that ``clip_grad_norm_`` already computed, instead of a second pass.

While anything listens, ``torch.nn.utils.clip_grad_norm_`` is a thin wrapper
that calls the original and hands the parameters and the returned total norm to
the listeners. Trainers (Lightning, Hugging Face through accelerate) look the
function up on ``torch.nn.utils`` at each call, so they go through it too.
Installing is idempotent, and the original comes back when the last listener leaves.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = ["ClipListener", "covers", "listen"]

#: ``(parameters, norm_type, total_norm)`` after each clip call.
ClipListener = Callable[[list[torch.Tensor], float, torch.Tensor], None]

_ORIGINAL = "_stepwatch_original"
_listeners: list[ClipListener] = []


def _norm_type(args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    """``norm_type`` as the caller passed it: after ``max_norm``, or by keyword."""
    return float(args[1] if len(args) > 1 else kwargs.get("norm_type", 2.0))


def _install() -> None:
    current = torch.nn.utils.clip_grad_norm_
    if getattr(current, _ORIGINAL, None) is not None:
        return

    @functools.wraps(current)
    def clip_grad_norm_(
        parameters: torch.Tensor | Iterable[torch.Tensor], *args: Any, **kwargs: Any
    ) -> torch.Tensor:
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        total = current(params, *args, **kwargs)
        norm_type = _norm_type(args, kwargs)
        for listener in tuple(_listeners):
            listener(params, norm_type, total)
        return total

    setattr(clip_grad_norm_, _ORIGINAL, current)
    torch.nn.utils.clip_grad_norm_ = clip_grad_norm_


def _uninstall() -> None:
    original = getattr(torch.nn.utils.clip_grad_norm_, _ORIGINAL, None)
    if original is not None:
        torch.nn.utils.clip_grad_norm_ = original


def listen(listener: ClipListener) -> Callable[[], None]:
    """Call ``listener`` after every ``clip_grad_norm_``; returns the function that stops it."""
    _install()
    _listeners.append(listener)

    def stop() -> None:
        if listener in _listeners:
            _listeners.remove(listener)
            if not _listeners:
                _uninstall()

    return stop


def covers(clipped: list[torch.Tensor], watched: list[torch.Tensor]) -> bool:
    """Whether a clip call's parameters include every watched one (so its norm is theirs).

    The usual call passes the very same parameters in the same order: that is checked first,
    without building a set each step."""
    if len(clipped) == len(watched) and all(map(operator.is_, clipped, watched)):
        return True
    return set(map(id, clipped)).issuperset(map(id, watched))
