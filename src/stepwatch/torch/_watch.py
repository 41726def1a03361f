"""``watch(model, optimizer)``: per-step training metrics from hooks, with no change to the loop."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

import torch

from ..sdk import Run, current_run
from ._clip import covers, listen
from ._device import Device, device_of
from ._grads import Labelled, grad_norm, learning_rates, snapshot, trainable, update_ratio
from ._steps import Recorder, StepMarks, Timeline

__all__ = ["Watcher", "watch"]

TokenCount = int | float | Callable[[], float]


def _hookable(optimizer: Any) -> torch.optim.Optimizer:
    """The torch optimizer itself when it is wrapped (accelerate keeps it in ``.optimizer``)."""
    inner = getattr(optimizer, "optimizer", None)
    return inner if isinstance(inner, torch.optim.Optimizer) else optimizer


class Watcher:
    """Records one optimizer step's ``train.*`` metrics from a forward pre-hook and step hooks.

    Built by :func:`watch`, which documents what is recorded; ``device`` is the
    timing boundary (``Host`` with its clock, or ``Cuda`` with its event factory).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        run: Run,
        *,
        tokens_per_step: TokenCount | None = None,
        log_every: int = 1,
        ratio_every: int | None = None,
        start_step: int = 0,
        device: Device | None = None,
    ) -> None:
        if log_every < 1 or (ratio_every is not None and ratio_every < 1) or start_step < 0:
            raise ValueError("log_every and ratio_every must be >= 1, start_step >= 0")
        self.run, self.step, self.closed = run, int(start_step), False
        run.current_step = self.step  # what run.log() without step= records at
        self._optimizer = _hookable(optimizer)
        self._tokens, self._log_every, self._ratio_every = tokens_per_step, log_every, ratio_every
        self._device = device if device is not None else device_of(model)
        self._timeline, self._recorder = Timeline(self._device), Recorder(run, self._device)
        self._leader = run.labels.get("rank", "0") == "0"
        self._clip_norm: torch.Tensor | None = None
        self._params: list[torch.Tensor] | None = None  # the step's, once looked up
        self._before: list[torch.Tensor] | None = None
        self._values: dict[str, object] = {}
        self._labelled: Labelled = []
        self._handles = [
            model.register_forward_pre_hook(self._on_forward),
            self._optimizer.register_step_pre_hook(self._before_step),
            self._optimizer.register_step_post_hook(self._after_step),
        ]
        self._stop_listening = listen(self._on_clip)

    def comm(self) -> AbstractContextManager[None]:
        """``with watcher.comm():`` around a collective adds its time to ``train.comm_time_s``."""
        return self._timeline.comm()

    def _logged(self) -> bool:
        return self.step % self._log_every == 0

    def _on_forward(self, module: torch.nn.Module, args: object) -> None:
        """A training forward starts (or continues) step ``self.step``: logs go there from now."""
        if module.training and torch.is_grad_enabled():
            self._timeline.begin()
            self.run.current_step = self.step

    def _on_clip(self, params: list[torch.Tensor], norm_type: float, total: torch.Tensor) -> None:
        if self._leader and self._logged() and norm_type == 2.0:
            self._params = trainable([self._optimizer])
            if covers(params, self._params):
                self._clip_norm = total

    def _before_step(self, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        if not (self._leader and self._logged()):
            return
        params = self._params if self._params is not None else trainable([optimizer])
        norm = self._clip_norm if self._clip_norm is not None else grad_norm(params)
        lrs, self._labelled = learning_rates([optimizer])
        self._values = {"train.grad_norm": norm, **lrs}
        if self._ratio_every is not None and self.step % self._ratio_every == 0:
            self._before = snapshot(params)

    def _after_step(self, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        marks = self._timeline.end()
        if self._logged():
            self._submit(marks, optimizer)
        else:
            self._recorder.drain()
        self._clip_norm, self._params, self._before = None, None, None
        self.step += 1

    def _submit(self, marks: StepMarks, optimizer: torch.optim.Optimizer) -> None:
        if self._before is not None:
            self._values["train.update_ratio"] = update_ratio(trainable([optimizer]), self._before)
        tokens = self._tokens_now()
        self._recorder.submit(self.step, marks, self._values, self._labelled, tokens)
        self._values, self._labelled = {}, []

    def _tokens_now(self) -> float | None:
        count = self._tokens
        if count is None or not self._leader:
            return None
        return float(count() if callable(count) else count)

    def close(self) -> None:
        """Remove every hook and log the steps still waiting for the device."""
        if self.closed:
            return
        self.closed = True
        for handle in self._handles:
            handle.remove()
        self._stop_listening()
        self._recorder.drain(wait=True)

    def __enter__(self) -> Watcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def watch(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    run: Run | None = None,
    *,
    tokens_per_step: TokenCount | None = None,
    log_every: int = 1,
    ratio_every: int | None = None,
    start_step: int = 0,
) -> Watcher:
    """Record every optimizer step's metrics through hooks; ``close()`` (or ``with``) removes them.

    Per step (numbered from ``start_step``): ``train.step_time_s`` (end of the
    previous step to the end of this one), ``train.data_time_s`` (end of the
    previous step to the first training forward: loading, but also evaluation or
    checkpoints in between), ``train.compute_time_s`` (first forward to the end of
    ``optimizer.step()``, less the ``watcher.comm()`` blocks inside it) and, once
    ``comm()`` is used, ``train.comm_time_s``. Rank 0 (the run's leader) also
    records ``train.grad_norm``, ``train.lr`` (labelled ``group`` when there are
    several param groups), ``train.tokens_per_s`` and ``train.update_ratio``. On a
    GPU the times are CUDA-event times and values are read a step or so later,
    when ready, so the loop never waits; ``gpu.torch_{allocated,reserved,peak}_bytes``
    come from the caching allocator (peak since start or the last reset).

    When the loop calls ``torch.nn.utils.clip_grad_norm_`` (itself or through
    Lightning, Hugging Face or accelerate) over the watched parameters, its total
    norm is reused (the norm before clipping); otherwise the norm is computed once
    before the step. A ``clip_grad_norm_`` imported by name before ``watch()`` was
    called is not seen, and the norm recorded is then the clipped one.

    ``run.log()`` without ``step=`` records at the step in progress: the one whose
    training forward came last (so a loss logged after ``optimizer.step()`` joins
    that step), ``start_step`` before the first.

    Do not also wrap steps in ``run.step()``: both would record the step times.
    Optimizers that run a closure inside ``step()`` (LBFGS, Lightning) are not
    supported: use the Lightning callback there. With gradient accumulation a step
    spans all its micro-batches; a step the AMP scaler skips joins the next one.

    Args:
        model: the module whose forward starts a step's compute (a DDP wrapper or its module).
        optimizer: the optimizer whose ``step()`` ends a step (accelerate's wrapper is unwrapped).
        run: where to log; default the current run (``stepwatch.init``).
        tokens_per_step: tokens of one optimizer step over all ranks, or a callable
            called after each logged step that returns them, for ``train.tokens_per_s``.
        log_every: record every this many steps (the others cost two marks).
        ratio_every: record ``train.update_ratio`` on logged steps that are multiples of
            this (copies the parameters before those steps).
        start_step: the number of the first step (when resuming).
    """
    if run is None:
        run = current_run()
    if run is None or run.finished:
        raise RuntimeError("watch() needs a running run: call stepwatch.init() first or pass run=")
    return Watcher(
        model,
        optimizer,
        run,
        tokens_per_step=tokens_per_step,
        log_every=log_every,
        ratio_every=ratio_every,
        start_step=start_step,
    )
