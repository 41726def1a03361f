"""Every kind of the built-in pack as a demo fault: its magnitude, what it edits, and the label
it leaves (none when it stays on the healthy side of its line).

Steps and readings are compared with the healthy simulation of the same seed, so every
difference is the fault's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from stepwatch.demo import (
    FAULT_KINDS,
    FAULT_SPECS,
    DemoConfig,
    Fault,
    FaultPlan,
    HardwareSample,
    HardwareSim,
    TrainingShape,
    TrainingSim,
    record_scenario,
)
from stepwatch.detect import PRECURSORS, Scenario, builtin_rules

SHAPE = TrainingShape(nodes=3, gpus_per_node=2, seed=5, eval_every=50, ckpt_every=100)


#: Kinds that tell of the telemetry itself, not of the training: an agent's pause is an
#: imperfection of collection (``Imperfections.gaps``), not a fault to inject.
OF_TELEMETRY = {"telemetry_gap"}


def test_there_is_a_fault_for_every_kind_of_the_builtin_pack() -> None:
    kinds = {rule.kind for rule in builtin_rules().rules}
    # a forecast warns of a fault before it comes: the fault is what the demo injects
    assert set(FAULT_KINDS) <= kinds and kinds - set(FAULT_KINDS) <= OF_TELEMETRY | set(PRECURSORS)


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("straggler@300:rank5*1.25", Fault("straggler", 300.0, rank=5, magnitude=1.25)),
        ("grad_vanishing*5e-8", Fault("grad_vanishing", magnitude=5e-8)),
        ("gpu_errors@10:node1/gpu0*48", Fault("gpu_errors", 10.0, node=1, gpu=0, magnitude=48)),
        ("host_memory_leak@0+600:node2*6", Fault("host_memory_leak", 0.0, 600.0, 2, None, None, 6)),
    ],
)
def test_a_magnitude_follows_the_place(text: str, fault: Fault) -> None:
    assert Fault.parse(text) == fault


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("straggler:rank1*fast", "a magnitude after \\* must be a number"),
        ("node_down:node1*2", "node_down takes no magnitude"),
        ("gpu_memory_pressure*1.5", r"magnitude \(share of memory\) must be within 0..1"),
        ("straggler*0.5", "must be within 1..100, got 0.5"),
        ("log_nccl@10+5", "log_nccl has no duration"),
        ("grad_explosion:node1", "about the whole run"),
    ],
)
def test_bad_magnitudes_say_what_is_wrong(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Fault.parse(text)


def test_a_node_against_its_peers_needs_three_nodes() -> None:
    with pytest.raises(ValueError, match="at least 3 nodes"):
        FaultPlan(TrainingShape(nodes=2, gpus_per_node=2), [Fault("sync_latency")])


def _step(plan: FaultPlan, k: int) -> tuple:
    """(healthy, faulty) step ``k``, after feeding the plan every step before it in order."""
    sim = TrainingSim(SHAPE)
    for j in range(k):
        plan.step(sim.step(j), j * SHAPE.step_s)
    healthy = sim.step(k)
    return healthy, plan.step(healthy, k * SHAPE.step_s)


def test_a_job_wide_regression_slows_every_step_by_its_factor() -> None:
    healthy, slow = _step(FaultPlan(SHAPE, [Fault("step_time_regression", 5.0, magnitude=1.3)]), 20)
    ratio = slow.timings["train.step_time_s"] / healthy.timings["train.step_time_s"]
    assert ratio == pytest.approx(np.full(SHAPE.ranks, 1.3))
    assert slow.busy == pytest.approx(healthy.busy)  # the GPUs are as busy, only slower


def test_a_slow_data_loader_makes_one_nodes_ranks_wait_and_their_gpus_idle() -> None:
    plan = FaultPlan(SHAPE, [Fault("dataloader_bottleneck", 5.0, node=1, magnitude=0.3)])
    healthy, slow = _step(plan, 20)
    share = slow.timings["train.data_time_s"] / slow.timings["train.compute_time_s"]
    assert (share[2:4] > 0.3).all() and (share[[0, 1, 4, 5]] < 0.1).all()
    assert (slow.busy < healthy.busy).all()  # everyone waits for node1's batches


def test_a_slow_network_multiplies_one_nodes_own_collective_time() -> None:
    healthy, slow = _step(FaultPlan(SHAPE, [Fault("sync_latency", 5.0, node=2)]), 20)
    comm = slow.timings["train.comm_time_s"] / healthy.timings["train.comm_time_s"]
    assert (comm[4:] > 2.0).all() and (comm[:4] < 1.2).all()


def test_a_slow_checkpoint_writes_at_its_bandwidth_and_only_checkpoints_show_it() -> None:
    plan = FaultPlan(SHAPE, [Fault("checkpoint_slow", 5.0, node=0, magnitude=150)])
    healthy, slow = _step(plan, 100)
    assert slow.ckpt_bytes / slow.ckpt_write_s[0] == pytest.approx(150e6)
    assert slow.ckpt_write_s[1:] == pytest.approx(healthy.ckpt_write_s[1:])
    assert slow.duration_s > healthy.duration_s
    assert _step(FaultPlan(SHAPE, [Fault("checkpoint_slow", 5.0, node=0)]), 99)[1].ckpt_s == 0


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        (Fault("grad_explosion", 5.0, magnitude=50), lambda h, f: f == pytest.approx(50 * h)),
        (Fault("grad_vanishing", 5.0), lambda h, f: 1e-10 < f < 1e-8),
    ],
)
def test_gradient_faults_set_the_gradient_norm(fault: Fault, check: object) -> None:
    healthy, faulty = _step(FaultPlan(SHAPE, [fault]), 12)
    assert check(healthy.train["train.grad_norm"], faulty.train["train.grad_norm"])  # type: ignore[operator]


def test_a_plateau_holds_the_loss_at_its_level_of_the_first_step() -> None:
    plan, sim = FaultPlan(SHAPE, [Fault("loss_plateau", 50.0)]), TrainingSim(SHAPE)
    trend = sim.loss_trend
    for k in range(100, 400):
        m = sim.step(k)
        faulty = plan.step(m, k * SHAPE.step_s).train["train.loss"]
        assert faulty / m.train["train.loss"] == pytest.approx(trend(100) / trend(k))


def _readings(plan: FaultPlan, seconds: int) -> list[tuple[HardwareSample, HardwareSample]]:
    """(healthy, faulty) one-second readings of a training step held for ``seconds``."""
    activity = TrainingSim(SHAPE).step(10).activity_at(0.0)
    hw, prev, out = HardwareSim(SHAPE), None, []
    for i in range(seconds):
        prev = hw.sample(i, activity, prev)
        out.append((prev, plan.hardware(prev, float(i), i)))
    return out


def test_gpu_faults_edit_their_gpu_only() -> None:
    faults = [
        Fault("gpu_underutilized", 0.0, node=0, gpu=1, magnitude=50),
        Fault("gpu_power_anomaly", 0.0, node=1, gpu=0, magnitude=0.3),
        Fault("gpu_errors", 0.0, node=2, gpu=1, magnitude=48),
    ]
    readings = _readings(FaultPlan(SHAPE, faults), 240)
    util = [f.gpu["gpu.util_pct"][0, 1] for _, f in readings]
    assert max(util) < 55 and min(h.gpu["gpu.util_pct"][0, 0] for h, _ in readings) > 80
    swing = [f.gpu["gpu.power_w"][1, 0] / h.gpu["gpu.power_w"][1, 0] for h, f in readings]
    assert min(swing) == pytest.approx(0.7) and 1.0 < max(swing) <= 1.3  # under the power cap
    for name in ("gpu.xid_errors", "gpu.ecc_errors"):
        assert all(f.gpu[name][2, 1] == 1 and f.gpu[name].sum() == 1 for _, f in readings)


def test_host_faults_grow_memory_fill_the_disk_and_saturate_a_core() -> None:
    faults = [
        Fault("host_memory_leak", 0.0, node=0, magnitude=36),  # 1 % of its start every 100 s
        Fault("disk_full", 0.0, node=1, magnitude=0.1),  # empty within 6 minutes
        Fault("cpu_saturation", 0.0, node=2),
    ]
    readings = _readings(FaultPlan(SHAPE, faults), 201)
    (h0, _), (h200, f200) = (r.host for r in readings[0]), (r.host for r in readings[200])
    leaked = f200["host.mem_used_bytes"][0] - h200["host.mem_used_bytes"][0]
    assert leaked == pytest.approx(0.02 * h0["host.mem_used_bytes"][0])
    filled = h200["host.disk_free_bytes"][1] - f200["host.disk_free_bytes"][1]
    assert filled == pytest.approx(h0["host.disk_free_bytes"][1] * 200 / 360)
    assert all(f.host["host.cpu_core_max_pct"][2] >= 99 for _, f in readings)


def _record(tmp_path: Path, *faults: str, seconds: float = 900.0) -> tuple[Path, Scenario]:
    config = DemoConfig(
        nodes=3,
        gpus_per_node=2,
        seed=11,
        duration_s=seconds,
        faults=tuple(Fault.parse(f) for f in faults),
    )
    path = record_scenario(config, tmp_path).path
    return path, Scenario.read(path)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in (path / "logs.jsonl").read_text().splitlines()]


def test_a_fault_below_its_line_leaves_no_label_and_its_magnitude_is_told(tmp_path: Path) -> None:
    path, scenario = _record(
        tmp_path, "straggler@100:rank3*1.1", "gpu_thermal@100:node1/gpu0*81", seconds=500
    )
    assert [(label.kind, label.deadline - label.start) for label in scenario.labels] == [
        ("gpu_thermal", 100.0 + 300.0)  # 80 °C 100 s in, then 5 minutes
    ]
    meta = json.loads((path / "labels.json").read_text())
    assert "straggler on rank 3 from 100 s to the end (1.1 x compute time)" in meta["faults"]


def test_a_lost_node_hangs_the_job_until_ncclS_watchdog_reports_on_every_peer(
    tmp_path: Path,
) -> None:
    path, scenario = _record(tmp_path, "node_down@100:node2")
    t0 = scenario.start
    assert [(lb.kind, lb.entity, lb.start - t0) for lb in scenario.labels] == [
        ("node_down", {"node": "node2"}, 100.0),
        ("log_nccl", {}, 700.0),
    ]
    watchdog = [
        x for x in _lines(path) if "Watchdog caught collective operation timeout" in x["line"]
    ]
    assert sorted(x["node"] for x in watchdog) == ["node0", "node1"]
    assert all(700 <= x["ts"] - t0 < 702 for x in watchdog)


def test_log_faults_write_the_lines_real_tools_print(tmp_path: Path) -> None:
    path, scenario = _record(
        tmp_path,
        "log_io_error@100:node1",
        "log_nonfinite@110",
        "log_gpu_error@120:node2/gpu1",
        "gpu_errors@130:node0/gpu1",
        seconds=200,
    )
    lines = _lines(path)
    texts = [x["line"] for x in lines]
    assert any(line.startswith("OSError: [Errno 122] Disk quota exceeded") for line in texts)
    assert any(line.startswith("{'loss': nan, 'grad_norm': nan") for line in texts)
    xid = [x for x in lines if x["line"].startswith("NVRM: Xid (PCI:0000:19:00): 79")]
    assert [x["node"] for x in xid] == ["node2", "node0"]
    kinds = [(lb.kind, lb.entity) for lb in scenario.labels]
    assert kinds[-1] == ("gpu_errors", {"node": "node0", "gpu": 1})


def test_step_counted_deadlines_count_the_pauses_too(tmp_path: Path) -> None:
    (label,) = _record(tmp_path, "loss_divergence@100", seconds=700)[1].labels
    assert label.deadline - label.start > FAULT_SPECS["loss_divergence"].deadline_steps * 0.5
    assert math.isfinite(label.deadline)
