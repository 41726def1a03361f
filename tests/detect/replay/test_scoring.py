"""Scoring alerts against labelled scenarios: found, timely, true and false incidents, per kind."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.detect import AlertRecord, Label, Scenario, score, write_alerts

T0 = 1_780_000_000.0
RUN = "faulty"


def _label(
    kind: str,
    entity: dict[str, str | int],
    start: float,
    end: float,
    deadline: float | None = None,
    also: tuple[str, ...] = (),
) -> Label:
    """A label with times in seconds after T0 (deadline 2 minutes after the start by default)."""
    deadline = start + 120 if deadline is None else deadline
    return Label(kind, entity, T0 + start, T0 + end, T0 + deadline, also)


def _scenario(*labels: Label, run: str = RUN, hours: float = 1.0) -> Scenario:
    return Scenario(run, 8, T0, T0 + hours * 3600, labels)


def _alert(kind: str, at: float, run: str = RUN, **entity: str | int) -> AlertRecord:
    return AlertRecord.of(kind, T0 + at, {"run": run, **entity})


@dataclass
class Case:
    name: str
    labels: list[Label]
    alerts: list[AlertRecord]
    found: int
    timely: int
    incidents: int
    true: int
    delays: list[float] = field(default_factory=list)


THERMAL = _label("gpu_thermal", {"node": "node1", "gpu": 3}, 100, 1000, deadline=500)
STRAGGLER = _label(
    "straggler", {"rank": 13}, 100, 2000, also=("step_time_regression", "gpu_power_anomaly")
)
NODE_DOWN = _label("node_down", {"node": "node2"}, 600, 3000, deadline=720)
NAN = _label("nonfinite", {}, 300, 310, deadline=360)
PRESSURE = _label("gpu_memory_pressure", {"node": "node1", "gpu": 3}, 4000, 5000)
OOM_LINE = _label("log_oom", {"node": "node1"}, 2500, 2560)

CASES = [
    Case("a timely hit", [THERMAL], [_alert("gpu_thermal", 280, node="node1", gpu=3)],
         1, 1, 1, 1, [180]),
    Case("a hit after the deadline is found but late", [THERMAL],
         [_alert("gpu_thermal", 800, node="node1", gpu=3)], 1, 0, 1, 1, [700]),
    Case("no alert is a miss", [THERMAL], [], 0, 0, 0, 0),
    Case("another GPU of the node is a miss and a false alert", [THERMAL],
         [_alert("gpu_thermal", 280, node="node1", gpu=2)], 0, 0, 1, 0),
    Case("another kind on the entity is a miss and a false alert", [THERMAL],
         [_alert("gpu_memory_pressure", 280, node="node1", gpu=3)], 0, 0, 1, 0),
    Case("up to 30 s early counts", [THERMAL], [_alert("gpu_thermal", 70, node="node1", gpu=3)],
         1, 1, 1, 1, [-30]),
    Case("earlier is outside the window", [THERMAL],
         [_alert("gpu_thermal", 69, node="node1", gpu=3)], 0, 0, 1, 0),
    Case("up to 120 s after the end counts", [THERMAL],
         [_alert("gpu_thermal", 1120, node="node1", gpu=3)], 1, 0, 1, 1, [1020]),
    Case("later is outside the window", [THERMAL],
         [_alert("gpu_thermal", 1121, node="node1", gpu=3)], 0, 0, 1, 0),
    Case("a node alert names a GPU label's node", [THERMAL],
         [_alert("gpu_thermal", 200, node="node1")], 1, 1, 1, 1, [100]),
    Case("a rank alert names its node and GPU (rank 13 = node1/gpu5)", [STRAGGLER],
         [_alert("straggler", 150, rank=13)], 1, 1, 1, 1, [50]),
    Case("a GPU alert names the rank there", [STRAGGLER],
         [_alert("straggler", 150, node="node1", gpu=5)], 1, 1, 1, 1, [50]),
    Case("a rank elsewhere does not", [STRAGGLER], [_alert("straggler", 150, rank=12)], 0, 0, 1, 0),
    Case("a run label is named by any alert of its kind", [NAN],
         [_alert("nonfinite", 301)], 1, 1, 1, 1, [1]),
    Case("alerts less than 600 s apart are one incident", [NODE_DOWN],
         [_alert("node_down", 660, node="node2"), _alert("node_down", 1200, node="node2"),
          _alert("node_down", 1799, node="node2")], 1, 1, 1, 1, [60]),
    Case("600 s apart starts another incident, here outside the window", [THERMAL],
         [_alert("gpu_thermal", 280, node="node1", gpu=3),
          _alert("gpu_thermal", 879, node="node1", gpu=3),
          _alert("gpu_thermal", 1479, node="node1", gpu=3)], 1, 1, 2, 1, [180]),
    Case("a rank's alerts and its GPU's are one incident", [STRAGGLER],
         [_alert("straggler", 150, rank=13), _alert("straggler", 400, node="node1", gpu=5)],
         1, 1, 1, 1, [50]),
    Case("an also kind on the label's node is true", [STRAGGLER],
         [_alert("straggler", 150, rank=13), _alert("gpu_power_anomaly", 170, node="node1", gpu=5)],
         1, 1, 2, 2, [50]),
    Case("an also kind of the whole run is true", [STRAGGLER],
         [_alert("straggler", 150, rank=13), _alert("step_time_regression", 700)],
         1, 1, 2, 2, [50]),
    Case("an also kind on another node is false", [STRAGGLER],
         [_alert("straggler", 150, rank=13), _alert("gpu_power_anomaly", 170, node="node0", gpu=5)],
         1, 1, 2, 1, [50]),
    Case("an also kind outside the label's window is false", [STRAGGLER],
         [_alert("straggler", 150, rank=13), _alert("step_time_regression", 2200)],
         1, 1, 2, 1, [50]),
    Case("an also kind alone does not find the label", [STRAGGLER],
         [_alert("step_time_regression", 700)], 0, 0, 1, 1),
    Case("alerts of another run are not scored", [THERMAL],
         [_alert("gpu_thermal", 280, run="other", node="node1", gpu=3)], 0, 0, 0, 0),
    Case("a forecast within its lead before its fault is true and finds no label", [PRESSURE],
         [_alert("forecast_oom", 400, node="node1", gpu=3)], 0, 0, 1, 1),
    Case("a forecast while its fault is under way is true", [PRESSURE],
         [_alert("forecast_oom", 4900, node="node1", gpu=3)], 0, 0, 1, 1),
    Case("a forecast longer than its lead before its fault is false", [PRESSURE],
         [_alert("forecast_oom", 399, node="node1", gpu=3)], 0, 0, 1, 0),
    Case("a forecast on another GPU is false", [PRESSURE],
         [_alert("forecast_oom", 1000, node="node1", gpu=2)], 0, 0, 1, 0),
    Case("a forecast of another fault is false", [PRESSURE],
         [_alert("forecast_thermal", 1000, node="node1", gpu=3)], 0, 0, 1, 0),
    Case("a GPU's forecast of running out of memory is true for its node's OOM line", [OOM_LINE],
         [_alert("forecast_oom", 1000, node="node1", gpu=3)], 0, 0, 1, 1),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_scoring_rules(case: Case) -> None:
    result = score(case.alerts, [_scenario(*case.labels, hours=2.0)])
    total = result.total
    assert (total.found, total.timely) == (case.found, case.timely)
    assert (total.incidents, total.true_incidents) == (case.incidents, case.true)
    assert total.delays == case.delays
    assert result.clean_hours == 0 and result.clean_false_incidents == 0


def test_counts_are_kept_per_kind_with_their_ratios() -> None:
    alerts = [
        _alert("gpu_thermal", 280, node="node1", gpu=3),
        _alert("gpu_thermal", 280, node="node0", gpu=0),
        _alert("node_down", 900, node="node2"),  # after the deadline
    ]
    result = score(alerts, [_scenario(THERMAL, NODE_DOWN, STRAGGLER)])
    thermal, down, straggler = (result.kinds[k] for k in ("gpu_thermal", "node_down", "straggler"))
    assert (thermal.recall, thermal.timely_recall, thermal.precision) == (1.0, 1.0, 0.5)
    assert (down.recall, down.timely_recall, down.precision) == (1.0, 0.0, 1.0)
    assert (straggler.recall, straggler.precision) == (0.0, None)
    assert result.recall == pytest.approx(2 / 3) and result.timely_recall == pytest.approx(1 / 3)
    assert result.precision == pytest.approx(2 / 3)
    assert [o.label.kind for o in result.missed] == ["node_down", "straggler"]
    assert [(i.kind, i.entity) for i in result.false_incidents] == [
        ("gpu_thermal", {"gpu": 0, "node": "node0"})
    ]


def test_false_alerts_per_clean_hour_count_only_runs_without_faults() -> None:
    clean = [_scenario(run="clean-a", hours=1.5), _scenario(run="clean-b", hours=0.5)]
    alerts = [
        _alert("gpu_thermal", 100, run="clean-a", node="node0", gpu=1),
        _alert("gpu_thermal", 200, run="clean-a", node="node0", gpu=1),  # same incident
        _alert("cpu_saturation", 100, run="clean-b", node="node3"),
        _alert("gpu_thermal", 280, node="node0", gpu=3),  # false, but not on a clean run
    ]
    result = score(alerts, [*clean, _scenario(THERMAL)])
    assert result.clean_hours == pytest.approx(2.0)
    assert result.clean_false_incidents == 2
    assert result.clean_false_per_hour == pytest.approx(1.0)
    assert result.precision == 0.0


def _write_scenario(root: Path, scenario: Scenario) -> Path:
    folder = root / scenario.run
    folder.mkdir()
    meta = {
        "run": scenario.run,
        "nodes": 4,
        "gpus_per_node": scenario.gpus_per_node,
        "steps": 100,
        "planned_total_steps": 100,
        "start": scenario.start,
        "end": scenario.end,
        "faults": [],
        "labels": [label.as_json() for label in scenario.labels],
    }
    (folder / "labels.json").write_text(json.dumps(meta))
    return folder


def test_scenario_folders_and_an_alerts_file_are_read(tmp_path: Path) -> None:
    folder = _write_scenario(tmp_path, _scenario(STRAGGLER, THERMAL))
    assert Scenario.read(folder) == _scenario(STRAGGLER, THERMAL)
    alerts = tmp_path / "alerts.jsonl"
    write_alerts(alerts, [_alert("straggler", 150, rank=13)])
    result = score(alerts, [folder])
    assert result.total.found == 1 and result.total.labels == 2
    table = result.table()
    assert table.splitlines()[0].split()[:4] == ["kind", "labels", "found", "timely"]
    assert any(line.split()[:4] == ["straggler", "1", "1", "1"] for line in table.splitlines())
    assert any(line.split()[:4] == ["gpu_thermal", "1", "0", "0"] for line in table.splitlines())


def test_a_folder_without_labels_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="labels.json"):
        Scenario.read(tmp_path)


def test_replay_score_prints_the_table_of_labelled_scenarios(tmp_path: Path) -> None:
    # A scenario whose only data are two log lines: an OOM at 60 s (labelled) and one at 900 s.
    folder = _write_scenario(tmp_path, _scenario(_label("log_oom", {"node": "node1"}, 60, 60)))
    oom = "torch.OutOfMemoryError: CUDA out of memory."
    lines = [{"run": RUN, "ts": T0 + t, "node": "node1", "rank": 8, "line": oom} for t in (60, 900)]
    (folder / "logs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = "ts,run,name,value,step,node,rank,gpu\n" + "".join(
        f"{T0 + t},{RUN},host.cpu_pct,30,,node1,,\n" for t in range(0, 1000, 10)
    )
    (folder / "metrics.csv.gz").write_bytes(gzip.compress(rows.encode()))
    result = CliRunner().invoke(main, ["replay", str(folder), "--score"])
    assert result.exit_code == 0, result.output
    rows_out = {line.split()[0]: line.split() for line in result.output.splitlines() if line}
    assert rows_out["log_oom"][1:4] == ["1", "1", "1"]
    assert rows_out["log_oom"][6:8] == ["2", "1"]  # two incidents, one false
