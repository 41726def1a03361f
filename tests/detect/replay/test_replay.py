"""`stepwatch replay`: the built-in pack over a small recorded scenario, alerts in its format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.detect import PRECURSORS, Alert, builtin_rules, read_alerts, to_record

ANOMALY_KINDS = {
    "nonfinite", "loss_spike", "loss_divergence", "loss_plateau", "grad_explosion",
    "grad_vanishing", "step_time_regression", "gpu_underutilized", "gpu_thermal", "gpu_errors",
    "host_memory_leak", "cpu_saturation", "disk_full", "log_oom", "log_nccl", "log_io_error",
    "log_nonfinite", "log_gpu_error", "straggler", "node_down",
    "gpu_memory_pressure", "checkpoint_slow", "dataloader_bottleneck", "sync_latency",
    "gpu_power_anomaly",
}  # fmt: skip


def _scenario(root: Path) -> Path:
    """One node, two GPUs, 20 minutes: GPU 1 runs hot from minute 5, an OOM line at minute 12."""
    where = root / "hot-gpu"
    where.mkdir()
    ts = 1.78e9 + np.arange(0.0, 1200.0, 5.0)
    rows: dict[str, list[object]] = {k: [] for k in ("ts", "name", "value", "step", "gpu")}
    for i, t in enumerate(ts):
        rows["ts"] += [t, t, t]
        rows["name"] += ["train.loss", "gpu.temp_c", "gpu.temp_c"]
        hot = t - ts[0] >= 300
        rows["value"] += [3.0 - i * 0.001, 62.0, 84.0 if hot else 62.0]
        rows["step"] += [i, None, None]
        rows["gpu"] += [None, 0, 1]
    n = len(rows["ts"])
    table = pa.table(
        {
            "ts": pa.array(rows["ts"], pa.float64()),
            "run": pa.array(["hot-gpu"] * n),
            "name": pa.array(rows["name"]),
            "value": pa.array(rows["value"], pa.float64()),
            "step": pa.array(rows["step"], pa.int64()),
            "node": pa.array(["node0"] * n),
            "rank": pa.array([0 if s is not None else None for s in rows["step"]], pa.int64()),
            "gpu": pa.array(rows["gpu"], pa.int64()),
        }
    )
    pq.write_table(table, where / "metrics.parquet")
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB"
    line = {"run": "hot-gpu", "ts": ts[0] + 720, "node": "node0", "rank": 0, "line": oom}
    (where / "logs.jsonl").write_text(json.dumps(line) + "\n")
    return where


def test_the_builtin_pack_covers_the_kinds_it_can_express_and_loads() -> None:
    kinds = {rule.kind for rule in builtin_rules().rules}
    # and missing telemetry, recorded; and the forecasts of what will break next
    assert kinds == ANOMALY_KINDS | {"telemetry_gap"} | set(PRECURSORS)
    assert all(rule.playbook for rule in builtin_rules().rules)


def test_replay_writes_the_alerts_of_a_recorded_scenario(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    out = tmp_path / "alerts.jsonl"
    result = CliRunner().invoke(main, ["replay", str(scenario), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 alerts from 720 samples" in result.output
    alerts = list(read_alerts(out))
    start = 1.78e9
    assert [(a.kind, a.ts - start, a.labels) for a in alerts] == [
        ("gpu_thermal", 445.0, {"run": "hot-gpu", "node": "node0", "gpu": 1}),  # half of 5 min
        ("log_oom", 720.0, {"run": "hot-gpu", "node": "node0"}),
    ]
    assert "GPU 1 on node0 at 80 °C or more" in alerts[0].extra["summary"]


def test_replay_with_a_bad_rule_file_says_where(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - alert: x\n")
    args = ["replay", str(_scenario(tmp_path)), "--rules", str(rules), "--out", "a.jsonl"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert f"{rules}:4: groups[0].rules[0]: missing required key 'signal'" in result.output


def test_a_forecasts_record_carries_when_it_expects_its_target() -> None:
    rule = next(r for r in builtin_rules().rules if r.alert == "forecast_thermal")
    labels = {"run": "r", "node": "node1", "gpu": "3"}
    alert = Alert(rule, "firing", 100.0, 40.0, 79.0, labels, {"summary": "s"}, 80.0, 700.0)
    record = to_record(alert)
    assert record.kind == "forecast_thermal" and record.extra["predicted_ts"] == 700.0
