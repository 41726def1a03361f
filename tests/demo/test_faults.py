"""Fault injection: each fault edits the right series from the right moment, and is labelled.

Steps and readings are compared with the healthy simulation of the same seed, so every
difference is the fault's.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.demo import (
    DemoConfig,
    Fault,
    FaultPlan,
    HardwareSample,
    HardwareSim,
    TrainingShape,
    TrainingSim,
    record_scenario,
    run_demo,
)
from stepwatch.detect import (
    ALERT_EVENT,
    Label,
    Scenario,
    builtin_rules,
    replay,
    score,
    to_record,
)
from stepwatch.sdk import HEARTBEAT
from stepwatch.store import Store

SHAPE = TrainingShape(nodes=2, gpus_per_node=4, seed=3, eval_every=50, ckpt_every=100)


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("gpu_thermal@60:node1/gpu3", Fault("gpu_thermal", 60.0, node=1, gpu=3)),
        ("straggler@30", Fault("straggler", 30.0)),
        ("straggler@30+90:rank5", Fault("straggler", 30.0, 90.0, rank=5)),
        ("node_down:node1", Fault("node_down", 60.0, node=1)),
        ("loss_spike@12.5", Fault("loss_spike", 12.5)),
    ],
)
def test_faults_are_parsed_from_their_spec(text: str, fault: Fault) -> None:
    assert Fault.parse(text) == fault


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("gpu_fire@10", "unknown fault 'gpu_fire'"),
        ("straggler@soon", "expected KIND"),
        ("straggler:host1", "a place is nodeN"),
        ("node_down@10+30:node1", "node_down has no duration"),
        ("loss_spike:node1", "about the whole run"),
    ],
)
def test_bad_specs_say_what_is_wrong(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Fault.parse(text)


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault("gpu_thermal", node=2), "no node2/gpu0 in 2x4"),
        (Fault("straggler", rank=8), "no rank 8 among 8"),
        (Fault("node_down", node=0), "node0 runs rank 0"),
    ],
)
def test_faults_must_fit_the_cluster(fault: Fault, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        FaultPlan(SHAPE, [fault])


def test_a_lost_node_needs_peers_to_be_told() -> None:
    with pytest.raises(ValueError, match="at least 2 nodes"):
        FaultPlan(TrainingShape(nodes=1, gpus_per_node=4), [Fault("node_down")])


def _steps(plan: FaultPlan, steps: range) -> list[tuple[float, float, float]]:
    """(time, healthy loss, faulty loss) of each step, a nominal step apart, fed in order."""
    sim, out = TrainingSim(SHAPE), []
    for k in steps:
        m, t = sim.step(k), k * SHAPE.step_s
        out.append((t, m.train["train.loss"], plan.step(m, t).train["train.loss"]))
    return out


def test_without_faults_steps_and_readings_pass_through_untouched() -> None:
    plan = FaultPlan(SHAPE)
    m = TrainingSim(SHAPE).step(5)
    sample = HardwareSim(SHAPE).sample(0, m.activity_at(0.0))
    assert not plan and plan.step(m, 2.5) is m and plan.hardware(sample, 2.5, 0) is sample


def test_a_straggler_computes_half_again_as_long_and_everyone_waits_for_it() -> None:
    plan = FaultPlan(SHAPE, [Fault("straggler", 10.0, rank=5)])
    sim = TrainingSim(SHAPE)
    before, healthy = sim.step(19), sim.step(21)
    assert plan.step(before, 9.5) is before
    slow = plan.step(healthy, 10.5)
    ratio = slow.timings["train.compute_time_s"] / healthy.timings["train.compute_time_s"]
    assert ratio[5] == pytest.approx(1.5)
    assert np.allclose(np.delete(ratio, 5), 1.0)
    waited = slow.timings["train.comm_time_s"] - healthy.timings["train.comm_time_s"]
    assert (np.delete(waited, 5) > 0.2 * SHAPE.step_s).all()
    assert (slow.timings["train.step_time_s"] > 1.2 * healthy.timings["train.step_time_s"]).all()
    assert slow.train["train.tokens_per_s"] < healthy.train["train.tokens_per_s"] / 1.2
    assert slow.busy[5] > slow.busy[4]  # the others' GPUs idle while they wait


def test_a_non_finite_burst_poisons_loss_and_gradient_for_its_duration() -> None:
    plan = FaultPlan(SHAPE, [Fault("nonfinite", 20.0, 5.0)])
    sim = TrainingSim(SHAPE)
    for k in range(30, 60):
        t = k * SHAPE.step_s
        train = plan.step(sim.step(k), t).train
        bad = 20.0 <= t < 25.0
        assert math.isnan(train["train.loss"]) is bad
        assert math.isinf(train["train.grad_norm"]) is bad


def test_a_loss_spike_doubles_the_loss_and_decays_within_its_steps() -> None:
    plan = FaultPlan(SHAPE, [Fault("loss_spike", 50.0)])  # 20 steps by default
    rows = _steps(plan, range(90, 130))
    ratio = [faulty / healthy for _, healthy, faulty in rows]
    assert ratio[:10] == [1.0] * 10  # steps 90-99 begin before 50 s
    assert ratio[10] == pytest.approx(2.0)
    assert all(a > b > 1.0 for a, b in zip(ratio[10:29], ratio[11:30], strict=True))
    assert ratio[30:] == [1.0] * 10


def test_a_diverging_loss_stops_falling_and_keeps_growing_with_the_steps() -> None:
    plan = FaultPlan(SHAPE, [Fault("loss_divergence", 50.0)])
    steps = range(100, 700, 100)
    rows, trend = _steps(plan, steps), TrainingSim(SHAPE).loss_trend
    stalled = [f / h * trend(k) / trend(100) for k, (_, h, f) in zip(steps, rows, strict=True)]
    assert stalled == pytest.approx([1.0, 1.1, 1.2, 1.3, 1.4, 1.5])


def _readings(plan: FaultPlan, seconds: int) -> list[tuple[HardwareSample, HardwareSample]]:
    """(healthy, faulty) one-second readings of a training step held for ``seconds``."""
    activity = TrainingSim(SHAPE).step(10).activity_at(0.0)
    hw, prev, out = HardwareSim(SHAPE), None, []
    for i in range(seconds):
        prev = hw.sample(i, activity, prev)
        out.append((prev, plan.hardware(prev, float(i), i)))
    return out


def _changed(a: HardwareSample, b: HardwareSample) -> set[tuple[str, int, int]]:
    return {
        (name, int(n), int(g))
        for name in a.gpu
        for n, g in zip(*np.nonzero(a.gpu[name] != b.gpu[name]), strict=True)
    } | {(name, -1, -1) for name in a.host if not np.array_equal(a.host[name], b.host[name])}


def test_a_hot_gpu_heats_past_85_and_throttles_from_then_on() -> None:
    plan = FaultPlan(SHAPE, [Fault("gpu_thermal", 30.0, node=1, gpu=2)])
    readings = _readings(plan, 240)
    for t, (healthy, faulty) in enumerate(readings):
        assert _changed(healthy, faulty) <= {("gpu.temp_c", 1, 2), ("gpu.throttle_reasons", 1, 2)}
        temp = faulty.gpu["gpu.temp_c"][1, 2]
        throttled = int(faulty.gpu["gpu.throttle_reasons"][1, 2]) & 0x40
        assert bool(throttled) == (temp >= 85)
        if t < 30:
            assert _changed(healthy, faulty) == set()
    temps = [faulty.gpu["gpu.temp_c"][1, 2] for _, faulty in readings]
    assert max(temps[:170]) < 85 <= min(temps[190:])  # 70 °C + 0.1 °C/s passes 85 at 180 s
    assert max(temps) < 95


def test_memory_pressure_passes_90_percent_and_stays_there() -> None:
    plan = FaultPlan(SHAPE, [Fault("gpu_memory_pressure", 10.0, node=0, gpu=1)])
    readings = _readings(plan, 200)
    share = [
        f.gpu["gpu.mem_used_bytes"][0, 1] / f.gpu["gpu.mem_total_bytes"][0, 1] for _, f in readings
    ]
    assert max(share[:95]) < 0.9 < min(share[110:])
    assert all(_changed(h, f) <= {("gpu.mem_used_bytes", 0, 1)} for h, f in readings)


def _record(tmp_path: Path, *faults: str, duration: float = 400.0) -> tuple[Path, Scenario]:
    config = DemoConfig(
        nodes=2,
        gpus_per_node=4,
        seed=11,
        duration_s=duration,
        faults=tuple(Fault.parse(f) for f in faults),
    )
    got = record_scenario(config, tmp_path)
    return got.path, Scenario.read(got.path)


def test_a_recorded_scenario_is_in_the_scenario_format_with_its_labels(tmp_path: Path) -> None:
    path, scenario = _record(
        tmp_path, "gpu_thermal@60:node0/gpu3", "node_down@200:node1", "log_oom@100:rank2"
    )
    assert path.name == scenario.run == "demo-s11-gpu_thermal-node_down-log_oom"
    meta = json.loads((path / "labels.json").read_text())
    assert (meta["nodes"], meta["gpus_per_node"], meta["end"] - meta["start"]) == (2, 4, 400.0)
    t0 = scenario.start
    assert [
        (lb.kind, lb.entity, lb.start - t0, lb.end - t0, lb.deadline - t0) for lb in scenario.labels
    ] == [
        ("gpu_thermal", {"node": "node0", "gpu": 3}, 60.0, 400.0, 60.0 + 100.0 + 300.0),
        ("log_oom", {"node": "node0"}, 100.0, 100.0, 160.0),
        ("node_down", {"node": "node1"}, 200.0, 400.0, 320.0),
    ]
    table = pq.read_table(path / "metrics.parquet")
    assert table.column_names == ["ts", "run", "name", "value", "step", "node", "rank", "gpu"]
    ts = table["ts"].to_numpy()
    assert (np.diff(ts) >= 0).all() and t0 <= ts[0] and ts[-1] <= t0 + 400
    node1 = table.filter(pc.equal(table["node"], "node1"))
    names = set(node1["name"].to_pylist())
    assert {HEARTBEAT, "host.cpu_pct", "gpu.util_pct", "train.compute_time_s"} <= names
    assert node1["ts"].to_numpy().max() < t0 + 201  # silent from 200 s on
    assert table["ts"].to_numpy().max() >= t0 + 399  # while node0 goes on
    steps = table.filter(pc.equal(table["name"], "train.step_time_s"))
    assert steps["ts"].to_numpy().max() < t0 + 201  # and waits for it: no step ends
    lines = [json.loads(line) for line in (path / "logs.jsonl").read_text().splitlines()]
    oom = [line for line in lines if "CUDA out of memory" in line["line"]]
    assert [(o["node"], o["rank"]) for o in oom] == [("node0", 2)]
    assert 100 <= oom[0]["ts"] - t0 < 102
    assert any("evaluation after step" in line["line"] for line in lines)  # normal events stay


def test_faults_of_the_steps_are_labelled_from_the_first_step_they_touch(tmp_path: Path) -> None:
    _, scenario = _record(tmp_path, "loss_spike@100", "straggler@150:rank6", "nonfinite@300+5")
    by_kind = {label.kind: label for label in scenario.labels}
    spike, straggler, nan = by_kind["loss_spike"], by_kind["straggler"], by_kind["nonfinite"]
    t0 = scenario.start
    assert 100 <= spike.start - t0 < 160 and spike.end > spike.start  # a pause may come first
    assert spike.deadline == spike.start + 60
    assert straggler.entity == {"node": "node1", "gpu": 2, "rank": 6}
    assert straggler.deadline == straggler.start + 180
    assert "step_time_regression" in straggler.also
    assert nan.entity == {} and nan.end - t0 == 305.0


def test_a_lost_node_ends_the_faults_on_it_and_hides_later_ones(tmp_path: Path) -> None:
    _, scenario = _record(
        tmp_path,
        "straggler@100:rank6",
        "node_down@200:node1",
        "gpu_thermal@150:node1/gpu0",  # would pass 85 °C at 300 s
        "log_oom@250:node1",
    )
    t0 = scenario.start
    assert [(lb.kind, lb.end - t0) for lb in scenario.labels] == [
        ("straggler", 200.0),
        ("node_down", 400.0),
    ]


def test_labels_leave_out_faults_after_the_end(tmp_path: Path) -> None:
    _, scenario = _record(tmp_path, "log_oom@500:node1", duration=300.0)
    assert scenario.clean and scenario.labels == ()


def test_label_json_round_trips() -> None:
    label = Label("straggler", {"rank": 3}, 1.0, 2.0, 3.0, ("sync_latency",))
    assert Label.from_json(json.loads(json.dumps(label.as_json()))) == label


def test_the_live_demo_injects_faults_and_the_collector_alerts(tmp_path: Path) -> None:
    config = DemoConfig(
        nodes=2,
        gpus_per_node=2,
        store_path=tmp_path / "demo.duckdb",
        spool_dir=tmp_path / "spool",
        port=0,
        step_interval_s=0.02,
        hw_interval_s=0.1,
        report_every_s=0.5,
        flush_interval_s=0.1,
        duration_s=3.0,
        faults=(Fault("log_oom", 0.5, node=1), Fault("node_down", 1.0, node=1)),
    )
    lines: list[str] = []
    summary = run_demo(config, out=lines.append, stop=threading.Event())
    assert "fault planned: node_down on node1 from 1 s to the end" in lines
    assert "fault injected: log_oom on node1 from 0.5 s" in lines
    with Store(config.store_path) as store:
        run = store.get_run(summary.run_id)
        assert run is not None
        last: dict[str, float] = {}
        for info in store.series(match={"run": summary.run_id}):
            node = str(info.key.label("node"))
            last[node] = max(last.get(node, 0.0), float(store.raw(info.id)["ts"].max()))
        assert last["node1"] + 1.0 < last["node0"]  # node1 fell silent at 1 s of 3
        alerts = store.records(run=summary.run_id, kind=ALERT_EVENT)
    assert any(e.labels.get("node") == "node1" and e.data["kind"] == "log_oom" for e in alerts)


def test_demo_record_writes_a_labelled_scenario_from_the_command_line(tmp_path: Path) -> None:
    args = ["demo", "--record", str(tmp_path), "--duration", "120", "--nodes", "2", "--gpus", "2"]
    result = CliRunner().invoke(main, [*args, "--seed", "4", "--fault", "straggler@30:rank3"])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "demo-s4-straggler"
    assert f"wrote {folder}: 120 simulated s" in result.output
    assert {p.name for p in folder.iterdir()} == {"metrics.parquet", "logs.jsonl", "labels.json"}
    (label,) = Scenario.read(folder).labels
    assert (label.kind, label.entity["rank"]) == ("straggler", 3)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--record", "x"], "--record needs --duration"),
        (["--duration", "5", "--fault", "node_down:node0"], "node0 runs rank 0"),
        (["--duration", "5", "--fault", "gpu_fire"], "unknown fault 'gpu_fire'"),
        (["--duration", "5", "--fault", "straggler*0.5"], "must be within 1..100, got 0.5"),
    ],
)
def test_demo_rejects_bad_faults_before_starting(args: list[str], error: str) -> None:
    result = CliRunner().invoke(main, ["demo", *args])
    assert result.exit_code == 2 and error in result.output


def test_a_plain_demo_tours_every_view_with_faults_that_all_fire(tmp_path: Path) -> None:
    args = ["demo", "--record", str(tmp_path), "--duration", "300", "--nodes", "2", "--gpus", "2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    (folder,) = tmp_path.iterdir()
    scenario = Scenario.read(folder)
    assert [label.kind for label in scenario.labels] == [
        "gpu_thermal",
        "straggler",
        "loss_spike",
        "log_oom",
    ]
    found = score([to_record(a) for a in replay(folder, builtin_rules())], [folder])
    assert found.timely_recall == 1.0 and found.precision == 1.0, found.table()
    assert max(label.start for label in scenario.labels) - scenario.labels[0].start < 240


def test_faults_none_is_a_healthy_demo_and_an_unknown_preset_is_refused(tmp_path: Path) -> None:
    args = ["demo", "--record", str(tmp_path), "--duration", "60", "--nodes", "2", "--gpus", "2"]
    result = CliRunner().invoke(main, [*args, "--faults", "none"])
    assert result.exit_code == 0, result.output
    assert Scenario.read(tmp_path / "demo-s0-clean").labels == ()
    refused = CliRunner().invoke(main, [*args, "--faults", "chaos"])
    assert refused.exit_code == 2 and "unknown fault preset 'chaos'; one of tour, none" in (
        refused.output
    )
