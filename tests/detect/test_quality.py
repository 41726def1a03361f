"""Detection quality: the built-in rule pack over labelled runs of the demo's fault model.

Runs of several shapes and seeds, healthy ones among them, are recorded in simulated time with
their ground truth, replayed through the built-in pack as `stepwatch replay` would, and scored.
Every run has the normal events that must not alert: learning-rate warm-up, evaluation pauses,
checkpoints, epoch boundaries and benign log lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stepwatch.demo import DemoConfig, Fault, record_scenario
from stepwatch.detect import Score, builtin_rules, replay, score, to_record

# (seed, nodes, GPUs per node, simulated seconds, faults)
RUNS = [
    (21, 2, 4, 1500, ()),
    (22, 4, 2, 1500, ()),
    (23, 3, 4, 1200, ("straggler@300:rank5", "log_oom@900:node2")),
    (24, 2, 4, 1200, ("gpu_thermal@200:node1/gpu2", "nonfinite@900")),
    (25, 4, 2, 1200, ("node_down@600:node3", "gpu_memory_pressure@300:node0/gpu1")),
    (26, 2, 4, 1500, ("loss_spike@500", "loss_divergence@1000")),
    (27, 3, 2, 1200, ("straggler@400", "gpu_thermal@700:node0/gpu0")),
]
FAULT_KINDS = {
    "nonfinite",
    "loss_spike",
    "loss_divergence",
    "straggler",
    "gpu_thermal",
    "gpu_memory_pressure",
    "node_down",
    "log_oom",
}


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Score:
    root = tmp_path_factory.mktemp("scenarios")
    paths: list[Path] = []
    for seed, nodes, gpus, seconds, faults in RUNS:
        config = DemoConfig(
            nodes=nodes,
            gpus_per_node=gpus,
            seed=seed,
            duration_s=seconds,
            faults=tuple(Fault.parse(f) for f in faults),
        )
        paths.append(record_scenario(config, root).path)
    rules = builtin_rules()
    alerts = [to_record(alert) for path in paths for alert in replay(path, rules)]
    return score(alerts, paths)


def _report(result: Score) -> str:
    missed = [f"missed {o.label.kind} {o.label.entity} on {o.run}" for o in result.missed]
    false = [f"false {i.kind} {i.entity} on {i.run}" for i in result.false_incidents]
    return "\n".join([result.table(), *missed, *false])


def test_every_fault_kind_is_labelled(scored: Score) -> None:
    assert {kind for kind, k in scored.kinds.items() if k.labels} == FAULT_KINDS


def test_the_builtin_pack_raises_few_false_alerts(scored: Score) -> None:
    assert scored.precision is not None and scored.precision >= 0.95, _report(scored)


def test_the_builtin_pack_finds_the_faults_in_time(scored: Score) -> None:
    assert scored.timely_recall is not None and scored.timely_recall >= 0.95, _report(scored)


def test_healthy_runs_raise_no_alert(scored: Score) -> None:
    assert scored.clean_hours > 0.5
    assert scored.clean_false_incidents == 0, _report(scored)
