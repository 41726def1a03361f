"""Advice: each item appears when the run's figures support it, with the numbers behind it and
a concrete change; a healthy run gets none; Young/Daly's interval checked by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from stepwatch.predict import (
    DEFAULT_GPU_MTBF_H,
    Advice,
    RunFacts,
    Setting,
    advise,
    checkpoint_waste,
    count_failures,
    count_restarts,
    idle_gpu_seconds,
    young_daly_interval,
)

HOURS = 3600.0
#: Ten hours on 8 GPUs, all well: a fifth of the memory free, little data wait and sync, and a
#: 30 s checkpoint every 30,000 s against Young/Daly's 36,742 s at the fleet's default MTBF.
HEALTHY = RunFacts(
    wall_s=10 * HOURS,
    gpus=8,
    config={"batch_size": 8, "gradient_accumulation_steps": 1, "num_workers": 4},
    step_s=1.0,
    data_wait_s=0.02,
    comm_s=0.1,
    host_cpu_pct=40.0,
    gpu_mem_peak=0.7,
    ckpt_write_s=30.0,
    ckpt_interval_s=30_000.0,
    startup_idle_gpu_s=0.5 * HOURS,
)


def _only(facts: RunFacts) -> Advice:
    (item,) = advise(facts)
    assert item.title and item.why
    return item


def test_a_healthy_run_gets_no_advice() -> None:
    assert advise(HEALTHY) == []
    assert advise(RunFacts(wall_s=0.0, gpus=1)) == []  # nothing measured yet


def test_memory_near_full_halves_the_micro_batch_and_doubles_accumulation() -> None:
    item = _only(replace(HEALTHY, gpu_mem_peak=0.95))
    assert item.kind == "memory_pressure"
    assert item.measurements == {"gpu_mem_peak_pct": pytest.approx(95.0), "oom_alert_count": 0}
    assert item.change == {
        "setting": "batch_size", "from": 8, "to": 4, "scale": 0.5,
        "and": {"setting": "gradient_accumulation_steps", "from": 1, "to": 2, "scale": 2.0},
    }  # fmt: skip


def test_an_oom_alert_is_pressure_and_the_trainers_own_keys_are_named() -> None:
    hf = {"args": {"per_device_train_batch_size": 16, "gradient_accumulation_steps": 2}}
    item = _only(replace(HEALTHY, config=hf, oom_alerts=3))
    assert item.kind == "memory_pressure" and item.measurements["oom_alert_count"] == 3
    assert (item.change["setting"], item.change["from"], item.change["to"]) == (
        "args.per_device_train_batch_size", 16, 8,
    )  # fmt: skip
    accumulation = item.change["and"]
    assert (accumulation["setting"], accumulation["from"], accumulation["to"]) == (
        "args.gradient_accumulation_steps", 2, 4,
    )  # fmt: skip


def test_pressure_at_a_micro_batch_of_one_asks_for_sharding_instead() -> None:
    item = _only(replace(HEALTHY, config={"batch_size": 1}, gpu_mem_peak=0.97))
    assert item.kind == "memory_pressure" and "shard" in item.change["action"]


def test_room_to_spare_doubles_the_micro_batch_when_accumulation_can_give_way() -> None:
    lightning = {"hparams": {"batch_size": 8}, "trainer": {"accumulate_grad_batches": 4}}
    item = _only(replace(HEALTHY, config=lightning, gpu_mem_peak=0.3))
    assert item.kind == "memory_headroom"
    assert item.measurements["gpu_mem_peak_pct"] == pytest.approx(30.0)
    assert (item.change["setting"], item.change["from"], item.change["to"]) == (
        "hparams.batch_size", 8, 16,
    )  # fmt: skip
    assert item.change["and"]["setting"] == "trainer.accumulate_grad_batches"
    assert (item.change["and"]["from"], item.change["and"]["to"]) == (4, 2)
    # without accumulation to give up, a bigger micro-batch would change the effective batch
    assert advise(replace(HEALTHY, gpu_mem_peak=0.3)) == []


def test_young_daly_by_hand() -> None:
    # sqrt(2 x 60 s x 36,000 s) = sqrt(4,320,000) = 2078.46 s
    assert young_daly_interval(60.0, 36_000.0) == pytest.approx(2078.4609690826528)
    # 60/600 writing + 600/(2 x 36,000) redone = 0.1 + 0.008333
    assert checkpoint_waste(600.0, 60.0, 36_000.0) == pytest.approx(0.1083333333)
    # at the optimum both halves are equal: 2 x 60/2078.46 = sqrt(2 x 60/36,000)
    assert checkpoint_waste(2078.4609690826528, 60.0, 36_000.0) == pytest.approx(
        math.sqrt(2 * 60.0 / 36_000.0)
    )


def test_checkpoints_too_often_for_the_failures_seen() -> None:
    # two failures in 20 h: MTBF 10 h = 36,000 s; a 60 s write every 600 s (600 steps of 1 s)
    facts = replace(HEALTHY, wall_s=20 * HOURS, gpus=64, failures=2, ckpt_write_s=60.0,
                    ckpt_interval_s=600.0, config={"save_steps": 600})  # fmt: skip
    item = _only(facts)
    assert item.kind == "checkpoint_interval" and "less often" in item.title
    assert item.measurements == pytest.approx({
        "ckpt_write_s": 60.0, "interval_now_s": 600.0, "interval_advised_s": 2078.46097,
        "mtbf_h": 10.0, "failure_count": 2, "gpu_hours": 1280.0,
        "lost_per_failure_now_s": 300.0, "lost_per_failure_advised_s": 1039.23048,
        "waste_now_pct": 10.833333, "waste_advised_pct": 5.773503,
    })  # fmt: skip
    assert (item.change["setting"], item.change["from"], item.change["to"]) == (
        "save_steps", 600, 2078,
    )  # fmt: skip
    assert "2 failure(s)" in item.why


def test_without_failures_the_fleet_default_mtbf_is_used_and_said() -> None:
    facts = replace(HEALTHY, ckpt_write_s=30.0, ckpt_interval_s=600.0, config={})
    item = _only(facts)
    mtbf_s = DEFAULT_GPU_MTBF_H * HOURS / 8  # 22.5e6 s over 8 GPUs
    assert item.measurements["mtbf_h"] == pytest.approx(6250.0)
    assert item.measurements["interval_advised_s"] == pytest.approx(math.sqrt(2 * 30 * mtbf_s))
    assert "fleet default" in item.why
    # no save_steps stated: the change is the interval in seconds
    assert (item.change["setting"], item.change["from"], item.change["to"]) == (
        "checkpoint_interval_s", 600, 36742,
    )  # fmt: skip


def test_checkpoints_too_rare_for_a_run_that_fails_often() -> None:
    # ten failures in 10 h: MTBF 1 h; Young/Daly says sqrt(2 x 60 x 3600) = 657 s, not 6 h
    item = _only(replace(HEALTHY, failures=10, ckpt_write_s=60.0, ckpt_interval_s=6 * HOURS))
    assert "more often" in item.title
    assert item.measurements["interval_advised_s"] == pytest.approx(657.2670690061994)
    assert item.measurements["lost_per_failure_now_s"] == pytest.approx(3 * HOURS)


def test_the_stated_interval_counts_when_too_few_checkpoints_were_seen() -> None:
    facts = replace(HEALTHY, ckpt_interval_s=None, config={"args": {"save_steps": 100}})
    item = _only(facts)  # 100 steps of 1 s against some 36,742 s
    assert item.measurements["interval_now_s"] == pytest.approx(100.0)
    assert item.change["setting"] == "args.save_steps" and item.change["to"] == 36742
    by_epoch = {"args": {"save_steps": 100, "save_strategy": "epoch"}}
    assert advise(replace(facts, config=by_epoch)) == []  # the steps are not what it goes by


def test_data_wait_with_cpu_to_spare_adds_workers() -> None:
    item = _only(replace(HEALTHY, data_wait_s=0.3))
    assert item.kind == "dataloader_workers"
    assert item.measurements == pytest.approx(
        {"step_s": 1.0, "data_wait_s": 0.3, "data_wait_pct": 30.0, "host_cpu_pct": 40.0}
    )
    # a batch per 0.7 s of compute takes 1/0.7 = 1.43x the workers: 4 -> ceil(5.71) = 6
    assert item.change == {"setting": "num_workers", "from": 4, "to": 6,
                           "scale": pytest.approx(1 / 0.7)}  # fmt: skip
    # at 80 % CPU there is room for 85/80 = 1.06x only: one more worker
    busy = _only(replace(HEALTHY, data_wait_s=0.3, host_cpu_pct=80.0))
    assert busy.change["to"] == 5 and busy.change["scale"] == pytest.approx(85 / 80)
    # loading in the main process (0 workers, as Hugging Face states it): 2 workers
    hf = _only(replace(HEALTHY, data_wait_s=0.3, config={"args": {"dataloader_num_workers": 0}}))
    assert (hf.change["setting"], hf.change["from"], hf.change["to"]) == (
        "args.dataloader_num_workers", 0, 2,
    )  # fmt: skip


def test_data_wait_with_the_cpu_saturated_moves_preprocessing_off_the_host() -> None:
    item = _only(replace(HEALTHY, data_wait_s=0.3, host_cpu_pct=96.0))
    assert item.kind == "data_preprocessing" and "action" in item.change
    assert item.measurements["host_cpu_pct"] == 96.0


def test_a_large_comm_share_doubles_accumulation_or_points_at_the_network() -> None:
    item = _only(replace(HEALTHY, comm_s=0.4))
    assert item.kind == "communication"
    # twice the micro-batches per sync: 0.4 / (2 x 0.6 + 0.4) = 25 %
    assert item.measurements["comm_pct"] == pytest.approx(40.0)
    assert item.measurements["comm_pct_advised"] == pytest.approx(25.0)
    assert item.change == {"setting": "gradient_accumulation_steps", "from": 1, "to": 2,
                           "scale": 2.0}  # fmt: skip
    network = _only(replace(HEALTHY, comm_s=0.4, network_alerts=2))
    assert network.kind == "network" and network.measurements["network_alert_count"] == 2


def test_idle_gpus_are_counted_with_what_releasing_them_saves() -> None:
    # 80 GPU-hours: 8 idle before the first step and 2 after, 12.5 %
    facts = replace(HEALTHY, startup_idle_gpu_s=8 * HOURS, training_idle_gpu_s=2 * HOURS)
    item = _only(facts)
    assert item.kind == "idle_gpus"
    assert item.measurements == pytest.approx({
        "idle_gpu_hours": 10.0, "startup_idle_gpu_hours": 8.0, "training_idle_gpu_hours": 2.0,
        "gpu_hours": 80.0, "idle_pct": 12.5, "idle_gpus_now_count": 0,
        "saved_gpu_hours_per_day": 24.0,
    })  # fmt: skip
    assert "before the GPUs are allocated" in item.change["action"]
    now = _only(replace(facts, idle_gpus_now=2))
    assert (
        now.measurements["saved_gpu_hours_per_day"] == 48.0 and "2 GPU(s)" in now.change["action"]
    )


def test_idle_buckets_split_at_the_first_step() -> None:
    ts = np.array([0.0, 10.0, 20.0, 30.0])
    gpus = [(ts, np.array([0.0, 50.0, 2.0, 3.0])), (ts, np.array([90.0, 90.0, 90.0, 90.0]))]
    assert idle_gpu_seconds(gpus, 10.0, 15.0) == (10.0, 20.0, 1)
    assert idle_gpu_seconds(gpus, 10.0, None) == (30.0, 0.0, 1)  # no step yet: all start-up
    # readings every 40 s in 10 s buckets count 40 s each; a silence of 400 s counts 40 s
    sparse = [(np.array([0.0, 40.0, 80.0, 480.0]), np.zeros(4))]
    assert idle_gpu_seconds(sparse, 10.0, None) == (160.0, 0.0, 1)
    assert idle_gpu_seconds([(np.array([5.0]), np.zeros(1))], 10.0, 0.0) == (0.0, 10.0, 1)


def test_failures_are_restarts_or_bursts_of_failure_alerts() -> None:
    assert count_restarts(np.array([0, 5, 10, 3, 8, -1, 9])) == 1  # -1: a bucket with no step
    assert count_failures(1, [1000.0, 100.0, 200.0]) == 2  # 100 and 200 are one burst
    assert count_failures(3, []) == 3


def test_settings_are_whole_numbers_where_the_config_states_them() -> None:
    config = {"batch_size": True, "args": {"per_device_train_batch_size": 16.0}}
    assert Setting.read(config, ("batch_size", "args.per_device_train_batch_size")) == Setting(
        "args.per_device_train_batch_size", 16
    )
    assert Setting.read({"batch_size": 2.5}, ("batch_size",)) == Setting("batch_size", None)
    assert Setting.read({"num_workers": 0}, ("num_workers",), least=0).value == 0
