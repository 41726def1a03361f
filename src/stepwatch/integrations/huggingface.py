"""The Hugging Face ``Trainer`` callback: ``Trainer(..., callbacks=[StepwatchCallback()])``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import (
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)

from ..sdk import FAILED, OK, Command, Controller, Outcome, Run
from ..torch._control import Guard, LoweredRates, rates
from ..torch._device import Host, device_of
from ..torch._grads import trainable
from ..torch._steps import Recorder, Timeline
from ._hf_schedule import hf_lr_schedule
from ._names import hf_metrics
from ._owner import RunOwner
from ._rollback import newest_good

__all__ = ["StepwatchCallback"]


def _config(args: TrainingArguments, model: Any) -> dict[str, Any]:
    config = getattr(model, "config", None)
    return {"args": args.to_dict(), "model": config.to_dict() if config is not None else {}}


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _read_file(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        return safetensors.torch.load_file(path, device="cpu")
    loaded: dict[str, torch.Tensor] = torch.load(path, map_location="cpu", weights_only=True)
    return loaded


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """The model weights a Trainer checkpoint folder holds (one file or shards), on the CPU."""
    for single, index in [
        (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME),
        (WEIGHTS_NAME, WEIGHTS_INDEX_NAME),
    ]:
        if (folder / single).is_file():
            return _read_file(folder / single)
        if (folder / index).is_file():
            shards = sorted(set(json.loads((folder / index).read_text())["weight_map"].values()))
            return {k: v for shard in shards for k, v in _read_file(folder / shard).items()}
    raise FileNotFoundError(f"no full model weights in {folder}")


class StepwatchCallback(TrainerCallback):
    """Logs a Trainer's steps, its logs and its checkpoints to a stepwatch run.

    Every process records ``train.step_time_s``, ``train.data_time_s`` (waiting
    for the step's batches) and ``train.compute_time_s`` at ``state.global_step``;
    logging, evaluation and checkpoint pauses between steps are left out of them.
    The main process maps each ``on_log`` (see ``_names``: ``loss`` → ``train.loss``,
    ``eval_loss`` → ``eval.loss``, other numbers → ``hf.<key>``) and records each
    checkpoint as a ``checkpoint`` event with ``ckpt.write_s`` and ``ckpt.bytes``.

    With a collector, the run's commands are applied after each step: ``lower_lr``
    scales the optimizer's groups and the scheduler's base rates, ``checkpoint`` sets
    ``control.should_save``, ``stop`` sets ``control.should_training_stop``, and
    ``skip_step`` drops updates with non-finite gradients (checked in
    ``on_pre_optimizer_step``), and ``rollback`` restores the model, optimizer and
    scheduler from the newest ``checkpoint-*`` folder the Trainer saved in this run
    whose weights are all finite (older ones when newer are not; ``failed`` when
    there is none). The step counter goes on from where it was.

    Args:
        run: log to this run (and leave it open); by default a run is started at
            ``on_train_begin`` (project and name from the arguments, config from
            them and the model's config, the planned steps from ``max_steps``) and
            finished at ``on_train_end``.
        commands: apply the collector's commands (training control).
        poll_interval_s: how often the collector is asked for new commands.
        **init_kwargs: passed to ``stepwatch.init`` over those defaults.
    """

    def __init__(
        self,
        run: Run | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
        commands: bool = True,
        poll_interval_s: float = 1.0,
        **init_kwargs: Any,
    ) -> None:
        self._owner = RunOwner(run, init_kwargs)
        self._clock = clock
        self._last = clock()
        self._timeline: Timeline | None = None
        self._recorder: Recorder | None = None
        self._commands, self._poll_interval_s = commands, poll_interval_s
        self._controller: Controller | None = None
        self._guard: Guard | None = None
        self._lowered = LoweredRates()
        self._control: TrainerControl | None = None
        self._objects: dict[str, Any] = {}
        self._saved: list[tuple[int, Path]] = []  # (step, folder) of this run's checkpoints

    @property
    def run(self) -> Run | None:
        """The run being logged to (None before training starts)."""
        return self._owner.run

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        model = kwargs.get("model")
        config = _config(args, model)
        if state.max_steps and (schedule := hf_lr_schedule(args, state.max_steps)) is not None:
            config["lr_schedule"] = schedule
        run = self._owner.start(
            project=getattr(args, "project", None) or "huggingface",
            name=args.run_name,
            config=config,
            planned_total_steps=state.max_steps or None,
        )
        self._saved = []
        device = device_of(model) if model is not None else Host()
        self._timeline, self._recorder = Timeline(device), Recorder(run, device)
        if self._commands:
            self._guard = Guard(run)
            handlers = {
                "lower_lr": self._lower_lr,
                "checkpoint": self._flag("should_save", "saving after this step"),
                "stop": self._flag("should_training_stop", "stopping after this step"),
                "skip_step": self._guard.arm,
                "rollback": self._rollback,
            }
            self._controller = Controller(run, handlers, interval_s=self._poll_interval_s)
        self._paused()

    def _optimization(self) -> tuple[list[Any], list[Any]]:
        """The Trainer's optimizer and scheduler, as lists (empty before it made them)."""
        optimizer, scheduler = self._objects.get("optimizer"), self._objects.get("lr_scheduler")
        optimizers = [optimizer] if optimizer is not None else []
        return optimizers, [scheduler] if scheduler is not None else []

    def _lower_lr(self, command: Command, step: int) -> Outcome:
        optimizers, schedulers = self._optimization()
        return self._lowered.lower(optimizers, command.args["factor"], schedulers, step)

    def _flag(self, name: str, detail: str) -> Callable[[Command, int], Outcome]:
        def apply(command: Command, step: int) -> Outcome:
            setattr(self._control, name, True)
            return Outcome(OK, detail)

        return apply

    def _rollback(self, command: Command, step: int) -> Outcome:
        model = self._objects.get("model")
        if model is None:
            return Outcome(FAILED, "the Trainer passed no model to restore")
        steps = {path: saved for saved, path in self._saved}
        folders = [path for _, path in reversed(self._saved) if path.is_dir()]
        found = newest_good(folders, _read_weights, lambda weights: weights)
        if isinstance(found, str):
            return Outcome(FAILED, found)
        unexpected = set(found.loaded) - set(model.state_dict())
        if unexpected:
            return Outcome(
                FAILED, f"{found.path} holds weights the model lacks: {sorted(unexpected)[:5]}"
            )
        before = rates(*self._optimization())
        model.load_state_dict(found.loaded, strict=False)  # tied weights are saved once
        for name, key in [(OPTIMIZER_NAME, "optimizer"), (SCHEDULER_NAME, "lr_scheduler")]:
            target = self._objects.get(key)
            if target is not None and (found.path / name).is_file():
                state = torch.load(found.path / name, map_location="cpu", weights_only=True)
                target.load_state_dict(state)
        kept = self._lowered.reapply(*self._optimization(), before, steps[found.path])
        return Outcome(OK, found.detail(steps[found.path]) + kept)

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        optimizer = kwargs.get("optimizer")
        if self._guard is not None and self._guard.left > 0 and optimizer is not None:
            self._guard.check(trainable([optimizer]), state.global_step)

    def _paused(self) -> None:
        """Between steps: what follows (until the next batch is asked for) is not step time."""
        if self._timeline is not None:
            self._timeline.resume()
        self._last = self._clock()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._timeline is not None:
            self._timeline.begin()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._timeline is None or self._recorder is None:
            return
        self._recorder.submit(state.global_step, self._timeline.end(), {})
        if self._controller is not None:
            self._control, self._objects = control, kwargs
            self._controller.boundary(state.global_step)
            self._control, self._objects = None, {}
            assert self._guard is not None
            self._guard.stepped()
        self._last = self._clock()

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        run = self.run
        if run is not None and not run.finished and state.is_world_process_zero and logs:
            values = hf_metrics(logs)
            if values:
                run.log(values, step=state.global_step)
        self._paused()

    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._paused()

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        run, step = self.run, state.global_step
        path = Path(args.output_dir or ".") / f"{PREFIX_CHECKPOINT_DIR}-{step}"
        self._saved = [saved for saved in self._saved if saved[1] != path] + [(step, path)]
        if run is not None and not run.finished and state.is_world_process_zero:
            write_s = self._clock() - self._last
            size = _tree_bytes(path) if path.is_dir() else 0
            run.log({"ckpt.write_s": write_s, "ckpt.bytes": size}, step=step)
            run.event(
                "checkpoint",
                f"saved checkpoint {path}",
                step=step,
                path=str(path),
                bytes=size,
                write_s=write_s,
            )
        self._paused()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._recorder is not None:
            self._recorder.drain(wait=True)
        if self._controller is not None:
            self._controller.close()
        self._timeline = self._recorder = self._controller = self._guard = None
        self._owner.end()
