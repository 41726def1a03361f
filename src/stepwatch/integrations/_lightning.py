"""The Lightning callback's hooks, shared by ``lightning.pytorch`` and ``pytorch_lightning``.

Lightning runs forward and backward in a closure inside ``optimizer.step()``, so
the step boundaries come from its batch hooks rather than optimizer hooks: a
step runs from the first ``on_train_batch_start`` after the previous optimizer
step to the ``on_train_batch_end`` that sees ``global_step`` advance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ..model import RunStatus
from ..sdk import FAILED, OK, Command, Controller, Outcome, Run
from ..torch._clip import covers, listen
from ..torch._control import Guard, LoweredRates, rates
from ..torch._device import device_of
from ..torch._grads import Labelled, grad_norm, learning_rates, trainable
from ..torch._schedule import stated_schedule
from ..torch._steps import Recorder, Timeline
from ._owner import RunOwner
from ._rollback import newest_good

__all__ = ["LightningHooks"]


def _planned(trainer: Any) -> int | None:
    if trainer.max_steps is not None and trainer.max_steps > 0:
        return int(trainer.max_steps)
    total = trainer.estimated_stepping_batches
    return int(total) if math.isfinite(total) else None


def _lr_schedule(trainer: Any, planned: int | None) -> dict[str, Any]:
    """``{"lr_schedule": ...}`` of the first scheduler stepped every optimizer step, when its
    rates take a shape the format holds; else nothing."""
    stepped = [c.scheduler for c in trainer.lr_scheduler_configs if c.interval == "step"]
    if not planned or not stepped:
        return {}
    schedule = stated_schedule(stepped[0], planned)
    return {} if schedule is None else {"lr_schedule": schedule}


def _config(trainer: Any, module: Any) -> dict[str, Any]:
    settings = ("max_steps", "max_epochs", "accumulate_grad_batches", "gradient_clip_val")
    return {
        "hparams": dict(getattr(module, "hparams", {})),
        "trainer": {name: getattr(trainer, name, None) for name in settings}
        | {"precision": str(trainer.precision), "world_size": trainer.world_size},
    }


def _clips_by_norm(trainer: Any) -> bool:
    """Whether Lightning will call ``clip_grad_norm_`` (its default algorithm is the norm)."""
    algorithm = trainer.gradient_clip_algorithm
    return bool(trainer.gradient_clip_val) and (algorithm is None or algorithm == "norm")


def _checkpoints(trainer: Any, own: Iterable[Path]) -> dict[Path, int]:
    """The checkpoint files known to us and the ModelCheckpoints, with their mtimes."""
    found = set(own)
    for callback in trainer.checkpoint_callbacks:
        paths = [getattr(callback, "last_model_path", ""), getattr(callback, "best_model_path", "")]
        paths += list(getattr(callback, "best_k_models", {}))
        found.update(Path(path) for path in paths if path)
        dirpath = getattr(callback, "dirpath", None)
        if dirpath and Path(dirpath).is_dir():
            found.update(Path(dirpath).glob(f"*{callback.FILE_EXTENSION}"))
    return {path: path.stat().st_mtime_ns for path in found if path.is_file()}


def _loss(outputs: object) -> torch.Tensor | None:
    """The loss in what ``training_step`` returned (a tensor, or a dict with ``loss``)."""
    if isinstance(outputs, Mapping):
        outputs = outputs.get("loss")
    return outputs.detach() if isinstance(outputs, torch.Tensor) else None


class LightningHooks:
    """Logs a Lightning fit: per-step times on every rank; loss, lr and grad norm on rank 0.

    ``train.step_time_s``, ``train.data_time_s`` and ``train.compute_time_s`` are
    recorded at the optimizer step's index (``global_step`` before it advances),
    leaving validation out of them; rank 0 adds ``train.loss`` (the mean over the
    step's micro-batches), ``train.lr`` (per param group when several) and
    ``train.grad_norm``, taken from Lightning's own ``clip_grad_norm_`` call when
    ``gradient_clip_val`` is set and computed in ``on_before_optimizer_step``
    otherwise. Each checkpoint is a ``checkpoint`` event. A run started here
    ends with ``on_train_end`` (finished) or ``on_exception`` (failed).

    With a collector, the run's commands are applied after each optimizer step:
    ``lower_lr`` scales every optimizer's groups and the schedulers' base rates,
    ``checkpoint`` calls ``trainer.save_checkpoint`` (under ``default_root_dir``/
    ``stepwatch``), ``stop`` sets ``trainer.should_stop``, and ``skip_step`` drops
    updates with non-finite gradients (checked in ``on_before_optimizer_step``), and
    ``rollback`` restores the module, optimizers and schedulers from the newest
    checkpoint written in this fit (by the ``checkpoint`` command or a
    ``ModelCheckpoint``: its last, best, top-k and other files in its ``dirpath``)
    whose weights are all finite (``failed`` when there is none); the step counter
    goes on from where it was.

    Args:
        run: log to this run (and leave it open); by default a run is started at
            ``on_train_start`` (name from the module class, config from its
            hparams and the trainer, planned steps from ``max_steps`` or the estimate).
        commands: apply the collector's commands (training control).
        poll_interval_s: how often the collector is asked for new commands.
        **init_kwargs: passed to ``stepwatch.init`` over those defaults.
    """

    def __init__(
        self,
        run: Run | None = None,
        *,
        commands: bool = True,
        poll_interval_s: float = 1.0,
        **init_kwargs: Any,
    ) -> None:
        self._owner = RunOwner(run, init_kwargs)
        self._timeline: Timeline | None = None
        self._recorder: Recorder | None = None
        self._stop_listening: Callable[[], None] | None = None
        self._commands, self._poll_interval_s = commands, poll_interval_s
        self._controller: Controller | None = None
        self._guard: Guard | None = None
        self._lowered = LoweredRates()
        self._trainer: Any = None
        self._own: list[Path] = []  # checkpoints the ``checkpoint`` command wrote
        self._before: dict[Path, int] = {}  # the files there were when the fit began
        self._reset_step()

    @property
    def run(self) -> Run | None:
        """The run being logged to (None before training starts)."""
        return self._owner.run

    def _reset_step(self) -> None:
        self._step: int | None = None
        self._losses: list[torch.Tensor] = []
        self._values: dict[str, object] = {}
        self._labelled: Labelled = []
        self._clipped: torch.optim.Optimizer | None = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        rank = {"rank": trainer.global_rank} if trainer.world_size > 1 else {}
        planned = _planned(trainer)
        run = self._owner.start(
            project="lightning",
            name=type(pl_module).__name__,
            config=_config(trainer, pl_module) | _lr_schedule(trainer, planned),
            planned_total_steps=planned,
            labels=rank,
        )
        device = device_of(pl_module)
        self._timeline, self._recorder = Timeline(device), Recorder(run, device)
        self._leader, self._clips = trainer.is_global_zero, _clips_by_norm(trainer)
        self._stop_listening = listen(self._on_clip)
        self._reset_step()
        if self._commands:
            self._trainer, self._guard = trainer, Guard(run)
            self._lowered = LoweredRates()
            self._own, self._before = [], _checkpoints(trainer, [])
            handlers = {
                "lower_lr": self._lower_lr,
                "checkpoint": self._checkpoint,
                "stop": self._stop,
                "skip_step": self._guard.arm,
                "rollback": self._rollback,
            }
            self._controller = Controller(run, handlers, interval_s=self._poll_interval_s)

    def _schedulers(self) -> list[Any]:
        return [config.scheduler for config in self._trainer.lr_scheduler_configs]

    def _lower_lr(self, command: Command, step: int) -> Outcome:
        factor = command.args["factor"]
        return self._lowered.lower(self._trainer.optimizers, factor, self._schedulers(), step)

    def _checkpoint(self, command: Command, step: int) -> Outcome:
        path = Path(self._trainer.default_root_dir) / "stepwatch" / f"step-{step}.ckpt"
        self._trainer.save_checkpoint(str(path))
        self._own.append(path)
        return Outcome(OK, f"saved {path}")

    def _rollback(self, command: Command, step: int) -> Outcome:
        trainer = self._trainer
        now = _checkpoints(trainer, self._own)
        written = [(mtime, path) for path, mtime in now.items() if self._before.get(path) != mtime]
        paths = [path for _, path in sorted(written, reverse=True)]
        # files this fit wrote, so as trusted as the fit's own resume: hparams and all
        read = partial(trainer.strategy.load_checkpoint, weights_only=False)
        found = newest_good(paths, read, lambda ckpt: ckpt["state_dict"])
        if isinstance(found, str):
            return Outcome(FAILED, found)
        checkpoint = found.loaded
        before = rates(trainer.optimizers, self._schedulers())
        trainer.strategy.load_model_state_dict(checkpoint)
        trainer.strategy.load_optimizer_state_dict(checkpoint)
        states = checkpoint.get("lr_schedulers", [])
        for config, state in zip(trainer.lr_scheduler_configs, states, strict=False):
            config.scheduler.load_state_dict(state)
        at = int(checkpoint.get("global_step", -1))
        kept = self._lowered.reapply(trainer.optimizers, self._schedulers(), before, at)
        return Outcome(OK, found.detail(at) + kept)

    def _stop(self, command: Command, step: int) -> Outcome:
        self._trainer.should_stop = True
        return Outcome(OK, "trainer.should_stop set")

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._timeline is not None and self._step is None:
            self._timeline.begin()
            self._step = trainer.global_step

    def on_before_optimizer_step(
        self, trainer: Any, pl_module: Any, optimizer: torch.optim.Optimizer
    ) -> None:
        if self._guard is not None and self._guard.left > 0:
            self._guard.check(trainable([optimizer]), trainer.global_step)
        if not self._leader:
            return
        lrs, self._labelled = learning_rates(trainer.optimizers)
        self._values.update(lrs)
        if self._clips:
            self._clipped = optimizer
        else:
            self._values["train.grad_norm"] = grad_norm(trainable([optimizer]))

    def _on_clip(self, params: list[torch.Tensor], norm_type: float, total: torch.Tensor) -> None:
        optimizer = self._clipped
        if optimizer is not None and norm_type == 2.0 and covers(params, trainable([optimizer])):
            self._values["train.grad_norm"] = total
            self._clipped = None

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = _loss(outputs)
        if loss is not None and self._leader:
            self._losses.append(loss)
        if self._step is not None and trainer.global_step != self._step:
            self._submit(self._step)
            if self._controller is not None and self._guard is not None:
                self._guard.stepped()
                self._controller.boundary(trainer.global_step)

    def _submit(self, step: int) -> None:
        assert self._timeline is not None and self._recorder is not None
        if self._losses:
            self._values["train.loss"] = torch.stack(self._losses).float().mean()
        self._recorder.submit(step, self._timeline.end(), self._values, self._labelled)
        self._reset_step()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self._timeline is not None and self._step is None:
            self._timeline.resume()  # validation between steps is not the next step's data wait

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        run = self.run
        if run is not None and not run.finished and trainer.is_global_zero:
            step = trainer.global_step
            run.event(
                "checkpoint", f"checkpoint at step {step}", step=step, epoch=trainer.current_epoch
            )

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._close(RunStatus.FINISHED)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        interrupted = isinstance(exception, KeyboardInterrupt)
        self._close(RunStatus.KILLED if interrupted else RunStatus.FAILED)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._close(RunStatus.FINISHED)

    def _close(self, status: str) -> None:
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None
        if self._recorder is not None:
            self._recorder.drain(wait=True)
        if self._controller is not None:
            self._controller.close()
        self._timeline = self._recorder = self._controller = self._guard = self._trainer = None
        self._owner.end(status)
