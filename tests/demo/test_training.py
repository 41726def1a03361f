"""The simulated training: reproducible per seed, shaped like a synchronous data-parallel run."""

from __future__ import annotations

import numpy as np
import pytest

from stepwatch.demo import Phase, StepMetrics, TrainingShape, TrainingSim
from stepwatch.predict import LrSchedule

TRAIN = ("train.loss", "train.lr", "train.grad_norm", "train.tokens_per_s")
TIMINGS = ("train.step_time_s", "train.data_time_s", "train.compute_time_s", "train.comm_time_s")
SHAPE = TrainingShape(nodes=2, gpus_per_node=4, seed=7, eval_every=50, ckpt_every=100)


def _same(a: StepMetrics, b: StepMetrics) -> bool:
    return a.train == b.train and all(
        np.array_equal(a.timings[name], b.timings[name]) for name in TIMINGS
    )


def test_a_step_depends_only_on_seed_and_index_not_on_call_order() -> None:
    first = TrainingSim(SHAPE)
    second = TrainingSim(SHAPE)
    forward = [first.step(k) for k in range(0, 120, 7)]
    backward = [second.step(k) for k in reversed(range(0, 120, 7))][::-1]
    assert all(_same(a, b) for a, b in zip(forward, backward, strict=True))


def test_another_seed_gives_another_run() -> None:
    other = TrainingSim(TrainingShape(nodes=2, gpus_per_node=4, seed=8))
    assert not _same(TrainingSim(SHAPE).step(3), other.step(3))


def test_metrics_have_the_vocabulary_names_and_one_value_per_rank() -> None:
    step = TrainingSim(SHAPE).step(10)
    assert set(step.train) == set(TRAIN)
    assert set(step.timings) == set(TIMINGS)
    assert all(v.shape == (SHAPE.ranks,) for v in step.timings.values())
    assert all(np.isfinite(v).all() and (v > 0).all() for v in step.timings.values())


def test_loss_falls_after_warm_up_and_warm_up_is_noisier() -> None:
    sim = TrainingSim(TrainingShape(seed=3))
    loss = np.array([sim.step(k).train["train.loss"] for k in range(3000)])
    medians = [np.median(loss[a : a + 200]) for a in (100, 800, 2700)]
    assert medians[0] > medians[1] > medians[2]
    relative_noise = np.abs(loss / sim.loss_trend(np.arange(3000)) - 1)
    assert np.median(relative_noise[:30]) > 2 * np.median(relative_noise[2000:])


def test_loss_bumps_at_an_epoch_boundary() -> None:
    shape = TrainingShape(seed=1, steps_per_epoch=1000)
    sim = TrainingSim(shape)
    ratio = [sim.step(k).train["train.loss"] / float(sim.loss_trend(k)) for k in range(960, 1010)]
    assert np.mean(ratio[40:45]) > np.mean(ratio[:40]) + 0.015


def test_learning_rate_warms_up_linearly_then_decays_to_a_tenth() -> None:
    shape = TrainingShape(warmup_steps=100, planned_total_steps=1000, lr_max=1e-3)
    sim = TrainingSim(shape)
    warm = [sim.lr(k) for k in range(100)]
    assert np.allclose(np.diff(warm), 1e-5)
    assert sim.lr(100) == pytest.approx(1e-3)
    assert sim.lr(1000) == pytest.approx(1e-4)
    decay = [sim.lr(k) for k in range(100, 1001)]
    assert (np.diff(decay) <= 0).all()


def test_every_rank_waits_for_the_slowest_in_the_all_reduce() -> None:
    sim = TrainingSim(SHAPE)
    ready, comm = [], []
    for k in range(1, 40):
        t = sim.step(k).timings
        ready.append(t["train.compute_time_s"] + t["train.data_time_s"])
        comm.append(t["train.comm_time_s"])
    # a rank that is ready early waits longer: the two are strongly anti-correlated
    assert np.corrcoef(np.concatenate(ready), np.concatenate(comm))[0, 1] < -0.8
    step = sim.step(5)
    total = sum(step.timings[n] for n in TIMINGS[1:])
    assert (step.timings["train.step_time_s"] > 0.98 * total).all()
    assert np.ptp(step.timings["train.step_time_s"]) < 0.02 * step.train_s


def test_evaluation_pauses_scale_step_time_on_all_ranks() -> None:
    sim = TrainingSim(SHAPE)
    ordinary = np.median([sim.step(k).timings["train.step_time_s"] for k in range(1, 50)])
    for k in (50, 150, 250):
        step = sim.step(k)
        assert step.val_loss is not None and step.eval_s > 0
        ratio = step.timings["train.step_time_s"] / ordinary
        assert ((ratio > 18) & (ratio < 62)).all()
        assert step.train["train.tokens_per_s"] < sim.step(k - 1).train["train.tokens_per_s"] / 15
    assert sim.step(49).eval_s == 0 and sim.step(49).val_loss is None


def test_checkpoints_pause_every_rank_and_write_fast_enough() -> None:
    sim = TrainingSim(SHAPE)
    step = sim.step(100)
    assert step.ckpt_write_s.shape == (SHAPE.nodes,) and (step.ckpt_write_s > 0).all()
    assert (step.timings["train.step_time_s"] > step.ckpt_s).all()
    assert (step.ckpt_bytes / step.ckpt_write_s > 200e6).all()
    assert not sim.step(99).ckpt_write_s.any() and sim.step(99).ckpt_bytes == 0


def test_a_step_goes_through_training_evaluation_and_checkpoint_phases() -> None:
    step = TrainingSim(SHAPE).step(100)
    assert step.duration_s == pytest.approx(step.train_s + step.eval_s + step.ckpt_s)
    assert step.phase_at(0.0) is Phase.TRAIN
    assert step.phase_at(step.train_s + 0.5 * step.eval_s) is Phase.EVAL
    writing = step.activity_at(step.train_s + step.eval_s + 0.01)
    assert writing.phase is Phase.CHECKPOINT
    assert (writing.disk_write_bytes_per_s > 0).all()
    fastest = float(step.ckpt_write_s.min())
    later = step.activity_at(step.train_s + step.eval_s + (fastest + step.ckpt_s) / 2)
    assert (later.disk_write_bytes_per_s == 0).sum() >= 1
    assert not step.activity_at(0.0).disk_write_bytes_per_s.any()


def test_checkpoints_on_disk_are_counted_with_retention() -> None:
    sim = TrainingSim(SHAPE)
    assert sim.step(100).ckpt_written_before == 0
    assert sim.step(101).ckpt_written_before == sim.ckpt_bytes
    assert sim.step(1000).ckpt_written_before == sim.step(400).ckpt_written_before


def test_samples_and_epochs_follow_the_step() -> None:
    step = TrainingSim(TrainingShape(global_batch=32, steps_per_epoch=10)).step(25)
    assert (step.samples_seen, step.epoch) == (26 * 32, 2)


@pytest.mark.parametrize("field", ["nodes", "eval_every", "planned_total_steps"])
def test_a_shape_with_a_zero_count_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        TrainingShape(**{field: 0})  # type: ignore[arg-type]


def test_negative_steps_are_refused() -> None:
    with pytest.raises(ValueError, match="step"):
        TrainingSim(SHAPE).step(-1)


def test_the_stated_schedule_is_the_rate_the_run_trains_with() -> None:
    shape = TrainingShape(nodes=1, gpus_per_node=2, planned_total_steps=2_000, warmup_steps=100)
    stated = LrSchedule.from_config(shape.config()["lr_schedule"])
    sim = TrainingSim(shape)
    after = np.arange(100, 2_000, 37)
    np.testing.assert_allclose(stated.lr(after), [sim.lr(int(k)) for k in after], rtol=1e-9)
