"""The events a step records and the lines the demo prints about it."""

from __future__ import annotations

from stepwatch.demo import DemoConfig, TrainingShape, TrainingSim
from stepwatch.demo._report import Reporter, step_events

SHAPE = TrainingShape(nodes=2, gpus_per_node=2, eval_every=10, ckpt_every=20, steps_per_epoch=20)


def test_ordinary_steps_record_no_events() -> None:
    assert step_events(TrainingSim(SHAPE).step(7), SHAPE) == []


def test_an_epoch_boundary_evaluation_and_checkpoint_are_each_recorded() -> None:
    step = TrainingSim(SHAPE).step(20)
    events = step_events(step, SHAPE)
    assert [e.kind for e in events] == ["epoch", "eval", "checkpoint"]
    epoch, evaluation, checkpoint = events
    assert epoch.data == {"epoch": 1, "step": 20}
    assert evaluation.data["val_loss"] == step.val_loss and evaluation.data["step"] == 20
    assert checkpoint.data["bytes"] == 2 * step.ckpt_bytes
    assert checkpoint.data["path"].endswith("step_0000020")
    assert checkpoint.data["write_s"] == step.ckpt_s


def test_progress_names_the_step_loss_and_what_the_job_is_doing() -> None:
    lines: list[str] = []
    report = Reporter(DemoConfig(), lines.append)
    step = TrainingSim(SHAPE).step(10)
    report.progress(None, step.phase_at(0.0), 0)
    report.progress(step, step.phase_at(step.train_s + 0.1), 1234)
    report.pause_started(TrainingSim(SHAPE).step(20))
    assert lines[0].startswith("starting")
    assert lines[1].startswith("step 10 | loss ") and "1,234 metric samples" in lines[1]
    assert lines[1].endswith("evaluating...")
    assert lines[2] == "step 20: evaluating then checkpointing (all ranks wait)"
