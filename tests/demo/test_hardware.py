"""Simulated GPU and host readings: vocabulary names, physical ranges, and the phases they show."""

from __future__ import annotations

import numpy as np

from stepwatch.demo import (
    GPU_METRICS,
    HOST_METRICS,
    HardwareSample,
    HardwareSim,
    Phase,
    TrainingShape,
    TrainingSim,
)

SHAPE = TrainingShape(nodes=3, gpus_per_node=4, seed=5, eval_every=50, ckpt_every=100)


def _readings(phase_offset: float, n: int = 30, step: int = 100) -> list[HardwareSample]:
    """``n`` one-second readings at a fixed point of a step, each lagging the one before."""
    activity = TrainingSim(SHAPE).step(step).activity_at(phase_offset)
    hw, prev, out = HardwareSim(SHAPE), None, []
    for i in range(n):
        prev = hw.sample(i, activity, prev)
        out.append(prev)
    return out


def test_every_vocabulary_metric_is_produced_with_the_cluster_shape() -> None:
    sample = _readings(0.0, n=1)[0]
    assert set(sample.gpu) == set(GPU_METRICS) and set(sample.host) == set(HOST_METRICS)
    assert all(v.shape == (3, 4) for v in sample.gpu.values())
    assert all(v.shape == (3,) for v in sample.host.values())


def test_readings_are_reproducible_per_seed() -> None:
    a, b = _readings(0.0, n=3), _readings(0.0, n=3)
    for x, y in zip(a, b, strict=True):
        assert all(np.array_equal(x.gpu[k], y.gpu[k]) for k in GPU_METRICS)
        assert all(np.array_equal(x.host[k], y.host[k]) for k in HOST_METRICS)


def test_readings_stay_in_physical_ranges_during_healthy_training() -> None:
    for s in _readings(0.0):
        g, h = s.gpu, s.host
        assert ((g["gpu.util_pct"] >= 0) & (g["gpu.util_pct"] <= 100)).all()
        assert (g["gpu.util_pct"] > 75).all()
        assert (g["gpu.mem_used_bytes"] < 0.9 * g["gpu.mem_total_bytes"]).all()
        assert (g["gpu.power_w"] <= g["gpu.power_limit_w"]).all()
        assert ((g["gpu.temp_c"] > 30) & (g["gpu.temp_c"] < 80)).all()
        assert not (g["gpu.xid_errors"].any() or g["gpu.ecc_errors"].any())
        assert (h["host.cpu_core_max_pct"] < 98).all()
        assert (h["host.mem_used_bytes"] < h["host.mem_total_bytes"]).all()
        assert (h["host.disk_free_bytes"] > 0).all()


def test_evaluation_and_checkpoints_idle_the_gpus_and_checkpoints_hit_the_disk() -> None:
    step = TrainingSim(SHAPE).step(100)
    hw = HardwareSim(SHAPE)
    at = {
        Phase.TRAIN: 0.0,
        Phase.EVAL: step.train_s + 0.5 * step.eval_s,
        Phase.CHECKPOINT: step.train_s + step.eval_s + 0.01,
    }
    s = {p: hw.sample(1, step.activity_at(t)) for p, t in at.items()}
    util = {p: float(s[p].gpu["gpu.util_pct"].mean()) for p in at}
    assert util[Phase.TRAIN] > 2 * util[Phase.EVAL] > 2 * util[Phase.CHECKPOINT]
    assert (s[Phase.CHECKPOINT].gpu["gpu.throttle_reasons"] == 1).all()
    disk = {p: s[p].host["host.disk_write_bytes_per_s"] for p in at}
    assert (disk[Phase.CHECKPOINT] > 100 * disk[Phase.TRAIN]).all()


def test_temperature_follows_power_with_a_lag() -> None:
    readings = _readings(0.0)
    first, warm = readings[0].gpu["gpu.temp_c"], readings[-1].gpu["gpu.temp_c"]
    assert (first < 50).all() and (warm - first > 10).all()  # GPUs warm up from idle
    warm = readings[-1]
    step = TrainingSim(SHAPE).step(100)
    idle = step.activity_at(step.train_s + step.eval_s + 0.01)
    cooled = HardwareSim(SHAPE).sample(31, idle, warm, dt=1.0)
    drop = warm.gpu["gpu.temp_c"] - cooled.gpu["gpu.temp_c"]
    assert (drop > 0).all() and (drop < 5).all()


def test_disk_free_drops_by_a_checkpoint_once_one_is_written() -> None:
    sim, hw = TrainingSim(SHAPE), HardwareSim(SHAPE)
    before = hw.sample(0, sim.step(50).activity_at(0.0)).host["host.disk_free_bytes"]
    after = hw.sample(0, sim.step(150).activity_at(0.0)).host["host.disk_free_bytes"]
    np.testing.assert_allclose(before - after, sim.ckpt_bytes)
