"""What the demo tells the person watching: the URL, progress lines, and notable moments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._links import look_again, run_link
from ._config import DemoConfig, DemoSummary
from ._fault_plan import FaultPlan
from ._shape import TrainingShape
from ._training import Phase, StepMetrics

_DOING = {Phase.EVAL: "evaluating", Phase.CHECKPOINT: "writing a checkpoint"}


@dataclass(frozen=True, slots=True)
class StepEvent:
    """A notable moment of a step: recorded as an SDK event and printed."""

    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


def step_events(step: StepMetrics, shape: TrainingShape) -> list[StepEvent]:
    """The events a training script would record when step ``step`` completes."""
    k, events = step.step, []
    if k > 0 and k % shape.steps_per_epoch == 0:
        epoch = k // shape.steps_per_epoch
        events.append(StepEvent("epoch", f"epoch {epoch} started at step {k}", {"epoch": epoch}))
    if step.val_loss is not None:
        text = f"evaluation after step {k}: val_loss {step.val_loss:.4f} ({step.eval_s:.1f} s)"
        events.append(
            StepEvent("eval", text, {"val_loss": step.val_loss, "duration_s": step.eval_s})
        )
    if step.ckpt_s > 0:
        path = f"/checkpoints/step_{k:07d}"
        total = step.ckpt_bytes * shape.nodes
        text = f"saved checkpoint {path}: {total / 1e9:.1f} GB in {step.ckpt_s:.1f} s"
        data = {"path": path, "bytes": total, "write_s": step.ckpt_s}
        events.append(StepEvent("checkpoint", text, data))
    for event in events:
        event.data["step"] = k
    return events


class Reporter:
    """Prints the demo's story through ``out``, one line at a time."""

    def __init__(self, config: DemoConfig, out: Callable[[str], object]) -> None:
        self._config, self._out = config, out

    def banner(self, url: str, run_id: str) -> None:
        c = self._config
        self._out(f"stepwatch demo: open {run_link(url, run_id)} to watch the run live")
        until = "Ctrl-C stops it" if c.duration_s is None else f"it stops after {c.duration_s:g} s"
        self._out(
            f"simulating run {run_id}: {c.nodes} nodes x {c.gpus_per_node} GPUs, "
            f"one step every ~{c.step_interval_s:g} s; {until}"
        )

    def progress(self, last: StepMetrics | None, phase: Phase, sent: int) -> None:
        """A status line: the last finished step's numbers and what the job does now."""
        if last is None:
            self._out(f"starting the first step | {sent:,} metric samples logged")
            return
        t = last.train
        line = (
            f"step {last.step:,} | loss {t['train.loss']:.3f} | lr {t['train.lr']:.2e} | "
            f"{t['train.tokens_per_s']:,.0f} tokens/s | {last.samples_seen:,} samples"
            f" | {sent:,} metric samples logged"
        )
        self._out(line + (f" | {_DOING[phase]}..." if phase in _DOING else ""))

    def pause_started(self, step: StepMetrics) -> None:
        doing = [
            what for what, s in (("evaluating", step.eval_s), ("checkpointing", step.ckpt_s)) if s
        ]
        self._out(f"step {step.step}: {' then '.join(doing)} (all ranks wait)")

    def event(self, event: StepEvent) -> None:
        self._out(event.text)

    def faults(self, plan: FaultPlan) -> None:
        """The faults planned for the run, announced at its start."""
        for fault in plan.placed:
            self._out(f"fault planned: {fault.text()}")

    def fault(self, text: str) -> None:
        self._out(f"fault injected: {text}")

    def stopping(self, status: str) -> None:
        self._out(f"stopping ({status}): finishing the runs, flushing, stopping the collector")

    def done(self, summary: DemoSummary, store_path: Path) -> None:
        self._out(
            f"run {summary.run_id} {summary.status}: {summary.steps:,} steps, "
            f"{summary.samples:,} metric samples and {summary.events} events "
            f"in {summary.elapsed_s:.0f} s, stored in {store_path}; "
            + look_again(store_path, summary.run_id)
        )
