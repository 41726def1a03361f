"""``control(run, optimizer, ...)``: the collector's commands applied to a plain PyTorch loop.

Commands are applied in the optimizer's step pre-hook: after ``backward()``,
before the update, when the gradients can still be checked and the update
still dropped (every gradient set to None: the optimizer then leaves each
parameter, and its state, as they were).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import torch

from ..sdk import (
    FAILED,
    OK,
    UNSUPPORTED,
    Command,
    CommandPoller,
    Controller,
    Outcome,
    Run,
    current_run,
)
from ._grads import trainable
from ._profile import Profile, profile

__all__ = [
    "Control",
    "Guard",
    "LoweredRates",
    "StopTraining",
    "control",
    "drop_update",
    "finite",
    "scale_lr",
]


class StopTraining(RuntimeError):
    """Raised from ``optimizer.step()`` when the collector asked the run to stop and no
    ``stop`` callback was given: catch it, save what you need, and leave the loop."""


def scale_lr(
    optimizers: Iterable[torch.optim.Optimizer], factor: float, schedulers: Iterable[Any] = ()
) -> Outcome:
    """Multiply every param group's learning rate by ``factor``, and the base rates of the
    schedulers (which would otherwise set the old rates again at their next step)."""
    before, after = [], []
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            before.append(float(group["lr"]))
            group["lr"] = group["lr"] * factor
            after.append(float(group["lr"]))
            if "initial_lr" in group:
                group["initial_lr"] = group["initial_lr"] * factor
    for scheduler in schedulers:
        if hasattr(scheduler, "base_lrs"):
            scheduler.base_lrs = [lr * factor for lr in scheduler.base_lrs]
    if not before:
        return Outcome(FAILED, "no param groups to change")
    return Outcome(OK, f"lr {before[0]:.3g} -> {after[0]:.3g} in {len(before)} group(s)")


def rates(optimizers: list[Any], schedulers: list[Any]) -> tuple[list[float], list[float]]:
    """Every param group's rate and every scheduler's base rates: taken before a load, they
    tell :meth:`LoweredRates.reapply` which of them the load reset."""
    groups = [float(g["lr"]) for opt in optimizers for g in opt.param_groups]
    return groups, [float(lr) for s in schedulers for lr in getattr(s, "base_lrs", [])]


@dataclass
class LoweredRates:
    """The ``lower_lr`` factors applied, by the step they were applied at.

    A rollback to a checkpoint saved before some of them restores the old rates with the
    optimizer's (or the scheduler's) state, which would undo the cure of a divergence: what the
    load put back is lowered again by the factors applied since.
    """

    applied: list[tuple[int, float]] = field(default_factory=list)

    def lower(
        self, optimizers: list[Any], factor: float, schedulers: list[Any], step: int
    ) -> Outcome:
        outcome = scale_lr(optimizers, factor, schedulers)
        if outcome.result == OK:
            self.applied.append((step, factor))
        return outcome

    def reapply(
        self,
        optimizers: list[Any],
        schedulers: list[Any],
        before: tuple[list[float], list[float]],
        step: int,
    ) -> str:
        """After a load of the state of ``step``: lower again, by the factors applied since,
        the rates the load reset (those it left alone are lowered already)."""
        factor = math.prod(f for at, f in self.applied if at >= step)
        if factor == 1.0:
            return ""
        groups, bases = before
        all_groups = [g for opt in optimizers for g in opt.param_groups]
        for group, old in zip(all_groups, groups, strict=True):
            if float(group["lr"]) != old:
                group["lr"] = group["lr"] * factor
                if "initial_lr" in group:
                    group["initial_lr"] = group["initial_lr"] * factor
        if rates([], schedulers)[1] != bases:
            for scheduler in schedulers:
                scheduler.base_lrs = [lr * factor for lr in scheduler.base_lrs]
        return f"; learning rate kept lowered (x{factor:.3g} of the checkpoint's)"


def finite(params: Iterable[torch.Tensor]) -> bool:
    """Whether every gradient is finite (one device sync)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return True
    return bool(torch.stack([torch.isfinite(g).all() for g in grads]).all().item())


def drop_update(params: Iterable[torch.Tensor]) -> None:
    """Make the coming ``optimizer.step()`` change nothing."""
    for p in params:
        p.grad = None


class Guard:
    """``skip_step``: while armed (a number of steps), an update whose gradients are not all
    finite is dropped and recorded as a ``step_skipped`` event."""

    def __init__(self, run: Run) -> None:
        self.run, self.left = run, 0
        self.skipped: list[int] = []  # steps whose update was dropped

    def arm(self, command: Command, step: int) -> Outcome:
        self.left = max(self.left, int(command.args.get("steps", 100)))
        return Outcome(OK, f"updates with non-finite gradients are dropped for {self.left} steps")

    def check(self, params: list[torch.Tensor], step: int) -> None:
        """Before the update of ``step``: drop it if armed and a gradient is not finite."""
        if self.left > 0 and not finite(params):
            drop_update(params)
            self.skipped.append(step)
            self.run.event(
                "step_skipped", f"update of step {step} dropped: non-finite gradients", step=step
            )

    def stepped(self) -> None:
        self.left = max(0, self.left - 1)


class Control:
    """Applies commands to one optimizer; built by :func:`control`, which documents them."""

    def __init__(
        self,
        run: Run,
        optimizer: torch.optim.Optimizer,
        *,
        save: Callable[[int], object] | None = None,
        load: Callable[[int], object] | None = None,
        stop: Callable[[], object] | None = None,
        scheduler: Any = None,
        start_step: int = 0,
        interval_s: float = 1.0,
        poller: CommandPoller | None = None,
        hard_stop: Callable[[], None] | None = None,
    ) -> None:
        self.run, self.optimizer, self.step = run, optimizer, int(start_step)
        self._save, self._load, self._stop, self._scheduler = save, load, stop, scheduler
        self.checkpoints: list[int] = []  # steps of the good checkpoints, oldest first
        self.lowered = LoweredRates()
        self.guard = Guard(run)
        self.profiles: list[Profile] = []  # captures the collector asked for
        self._drop_next = False
        handlers = {
            "lower_lr": self._lower_lr,
            "skip_step": self.guard.arm,
            "stop": self._on_stop,
            "profile": self._profile,
        }
        if save is not None:
            handlers["checkpoint"] = self._checkpoint
        if load is not None:
            handlers["rollback"] = self._rollback
        extra = {} if hard_stop is None else {"hard_stop": hard_stop}
        self.controller = Controller(run, handlers, poller=poller, interval_s=interval_s, **extra)
        self._handles = [
            optimizer.register_step_pre_hook(self._before_step),
            optimizer.register_step_post_hook(self._after_step),
        ]

    @property
    def skipped(self) -> list[int]:
        """Steps whose update was dropped for non-finite gradients."""
        return self.guard.skipped

    @property
    def stop_requested(self) -> bool:
        """True once a stop command was applied: the loop should end."""
        return self.controller.stop_requested

    def _params(self) -> list[torch.Tensor]:
        return trainable([self.optimizer])

    def checkpoint(self, step: int | None = None) -> bool:
        """Save through ``save`` now (the loop's own periodic checkpoints go through here so
        that ``rollback`` knows them); refused (False) while any parameter is not finite."""
        if self._save is None:
            raise RuntimeError("control() was given no save= callback")
        step = self.step if step is None else step
        if not all(bool(torch.isfinite(p).all()) for p in self._params()):
            return False
        self._save(step)
        self.checkpoints.append(step)
        self.run.event("checkpoint", f"checkpoint at step {step}", step=step)
        return True

    # ---- handlers (training thread, in the pre-hook) ------------------------------------

    def _schedulers(self) -> list[Any]:
        return [self._scheduler] if self._scheduler is not None else []

    def _lower_lr(self, command: Command, step: int) -> Outcome:
        factor = float(command.args.get("factor", 0.5))
        return self.lowered.lower([self.optimizer], factor, self._schedulers(), step)

    def _profile(self, command: Command, step: int) -> Outcome:
        steps = int(command.args.get("steps", 5))
        self.profiles.append(profile(self.optimizer, self.run, steps=steps))
        return Outcome(OK, f"profiling {steps} steps from step {step + 2}")

    def _checkpoint(self, command: Command, step: int) -> Outcome:
        if self.checkpoint(step):
            return Outcome(OK, f"saved at step {step}")
        return Outcome(FAILED, "parameters are not finite: not saving a bad checkpoint")

    def _rollback(self, command: Command, step: int) -> Outcome:
        if self._load is None:
            return Outcome(UNSUPPORTED, "control() was given no load= callback")
        if not self.checkpoints:
            return Outcome(FAILED, "no good checkpoint to roll back to")
        target = self.checkpoints[-1]
        before = rates([self.optimizer], self._schedulers())
        self._load(target)
        self._drop_next = True  # this step's gradients belong to the state left behind
        kept = self.lowered.reapply([self.optimizer], self._schedulers(), before, target)
        return Outcome(OK, f"rolled back to the checkpoint of step {target}{kept}")

    def _on_stop(self, command: Command, step: int) -> Outcome:
        if self._stop is not None:
            self._stop()
            return Outcome(OK, "the loop's stop callback was called")
        return Outcome(OK, "StopTraining raised from optimizer.step()")

    # ---- hooks --------------------------------------------------------------------------

    def _before_step(self, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        self.controller.boundary(self.step)
        params = self._params()
        if self._drop_next:
            self._drop_next = False
            drop_update(params)
        else:
            self.guard.check(params, self.step)
        if self.controller.stop_requested and self._stop is None:
            raise StopTraining(f"the collector asked run {self.run.id!r} to stop")

    def _after_step(self, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        self.step += 1
        self.guard.stepped()

    def close(self) -> None:
        """Remove the hooks, post the answers still queued, and disarm the hard stop."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.controller.close()

    def __enter__(self) -> Control:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def control(
    run: Run | None = None,
    *,
    optimizer: torch.optim.Optimizer,
    save: Callable[[int], object] | None = None,
    load: Callable[[int], object] | None = None,
    stop: Callable[[], object] | None = None,
    scheduler: Any = None,
    start_step: int = 0,
    interval_s: float = 1.0,
) -> Control:
    """Let the collector steer this loop; ``close()`` (or ``with``) ends it.

    Commands arrive on a background thread and are applied in ``optimizer.step()``,
    before the update (step numbers count ``step()`` calls from ``start_step``):

    - ``lower_lr(factor)``: every param group's ``lr`` (and ``scheduler``'s base rates)
      times ``factor``.
    - ``skip_step(steps)``: for the next ``steps`` steps, an update whose gradients
      are not all finite is dropped (a ``step_skipped`` event records it).
    - ``checkpoint``: ``save(step)``, unless a parameter is not finite. Call
      ``ctl.checkpoint()`` for the loop's own periodic checkpoints too: ``rollback``
      goes back to the last of them.
    - ``rollback``: ``load(step)`` of the last good checkpoint; the pending update is
      dropped. The loop's step counter goes on.
    - ``profile(steps)``: torch.profiler over the next ``steps`` steps (after two of
      warm-up), the trace uploaded to the collector (:func:`stepwatch.torch.profile`), on
      the ranks the command names (every rank when it names none); the others go on.
    - ``stop``: calls ``stop()`` when given (set a flag your loop checks), otherwise
      raises :class:`StopTraining` out of ``optimizer.step()``; either way, a process
      still running ``timeout_s`` later gets a KeyboardInterrupt in its main thread.

    Commands without a callback (``checkpoint`` without ``save``...) are answered
    ``unsupported``; every answer goes back to the collector and its audit trail.

    Args:
        run: the run whose commands to apply; default the current run.
        optimizer: the optimizer to hook (accelerate's wrapper is unwrapped).
        save: ``save(step)`` writes a checkpoint.
        load: ``load(step)`` restores the checkpoint ``save(step)`` wrote (model and optimizer).
        stop: called on ``stop``; without it ``StopTraining`` is raised.
        scheduler: a learning-rate scheduler whose base rates ``lower_lr`` scales too.
        start_step: the number of the first step (when resuming).
        interval_s: how often the collector is asked for new commands.
    """
    if run is None:
        run = current_run()
    if run is None or run.finished:
        raise RuntimeError(
            "control() needs a running run: call stepwatch.init() first or pass run="
        )
    inner = getattr(optimizer, "optimizer", None)
    hooked = inner if isinstance(inner, torch.optim.Optimizer) else optimizer
    return Control(
        run, hooked, save=save, load=load, stop=stop, scheduler=scheduler,
        start_step=start_step, interval_s=interval_s,
    )  # fmt: skip
