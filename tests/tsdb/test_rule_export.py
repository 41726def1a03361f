"""`stepwatch rules export --format prometheus`: the pack as a rule file that promtool accepts,
whose rules fire in promtool's own unit tests where stepwatch's would, and which lists what it
approximates and what it leaves out."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.detect import builtin_rules
from stepwatch.tsdb import export_prometheus, prometheus_name

KINDS = {r.alert: (r.kind, r.severity) for r in builtin_rules().rules}
GIB = 2**30


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: run scripts/system-deps")
    return found


def _promtool_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_promtool(), *args], capture_output=True, text=True, timeout=120)


def _export(tmp_path: Path, *args: str) -> tuple[Path, str]:
    out = tmp_path / "stepwatch-rules.yml"
    result = CliRunner().invoke(main, ["rules", "export", "--format", "prometheus",
                                       "--out", str(out), *args])  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, result.stderr


def test_promtool_accepts_the_exported_pack(tmp_path: Path) -> None:
    path, said = _export(tmp_path)
    checked = _promtool_run("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    groups = yaml.safe_load(path.read_text())["groups"]
    exported = {r["alert"] for g in groups for r in g["rules"]}
    assert {"gpu_xid", "disk_full", "gpu_memory_pressure", "nonfinite_loss", "node_down",
            "disk_filling", "forecast_thermal", "gpu_thermal_throttle"} <= exported  # fmt: skip
    head = path.read_text().split("groups:")[0]
    for alert in ("loss_spike", "straggler", "log_oom"):  # robust statistics, peers, logs
        assert alert not in exported and f"#   {alert}: " in head and alert in said
    assert "#   forecast_thermal: " in head  # approximated, and said so


def _alert(name: str, **labels: str) -> dict[str, Any]:
    kind, severity = KINDS[name]
    return {"exp_labels": {"severity": severity, "kind": kind, **labels}}


def _no_annotations(path: Path) -> Path:
    """The rule file without its annotations: promtool's unit tests compare them whole, and
    `check rules` has checked their templates; here only when a rule fires counts."""
    doc = yaml.safe_load(path.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule["alert"] != "gpu_xid":  # its annotations are compared, rendered
                rule.pop("annotations", None)
    out = path.with_name("unit-rules.yml")
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def _case(
    interval: str, series: dict[str, str], alert: str, at: str, *fired: dict[str, Any]
) -> dict[str, Any]:
    return {
        "interval": interval,
        "input_series": [{"series": s, "values": v} for s, v in series.items()],
        "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": list(fired)}],
    }


def _name(metric: str, **labels: str) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{prometheus_name(metric)}{{{inner}}}"


def test_the_exported_rules_fire_in_promtool_s_unit_tests(tmp_path: Path) -> None:
    path, _ = _export(tmp_path)
    rules = _no_annotations(path)
    xid = _alert("gpu_xid", node="n0", gpu="1")
    xid["exp_annotations"] = {
        "summary": "XID errors on GPU 1 of n0 (since its start)",
        **{
            k: v
            for k, v in dict(
                next(r for r in builtin_rules().rules if r.alert == "gpu_xid").annotations
            ).items()
            if k != "summary"
        },
        "playbook": next(r for r in builtin_rules().rules if r.alert == "gpu_xid").playbook,
    }
    tests = [
        _case(
            "15s",
            {
                _name("gpu.xid_errors", node="n0", gpu="1", run="r"): "0 0 1 1 1",
                _name("gpu.xid_errors", node="n0", gpu="2", run="r"): "0 0 0 0 0",
            },
            "gpu_xid",
            "1m",
            xid,
        ),
        # under 10 GiB free, held a minute: pending at 30 s, firing after
        _case(
            "15s",
            {
                _name("host.disk_free_bytes", node="n0"): f"{5 * GIB}x10",
                _name("host.disk_free_bytes", node="n1"): f"{50 * GIB}x10",
            },
            "disk_full",
            "30s",
        ),
        _case(
            "15s",
            {_name("host.disk_free_bytes", node="n0"): f"{5 * GIB}x10"},
            "disk_full",
            "2m",
            _alert("disk_full", node="n0"),
        ),
        # used over total above 90 % for half of the last minute; the other GPU at half
        _case(
            "15s",
            {
                _name("gpu.mem_used_bytes", node="n0", gpu="0"): "95x10",
                _name("gpu.mem_total_bytes", node="n0", gpu="0"): "100x10",
                _name("gpu.mem_used_bytes", node="n0", gpu="1"): "50x10",
                _name("gpu.mem_total_bytes", node="n0", gpu="1"): "100x10",
            },
            "gpu_memory_pressure",
            "2m",
            _alert("gpu_memory_pressure", node="n0", gpu="0"),
        ),
        # thermal slowdown bits (0x60): 64 has one, 1 none; held 30 s
        _case(
            "15s",
            {
                _name("gpu.throttle_reasons", node="n0", gpu="0"): "64x10",
                _name("gpu.throttle_reasons", node="n0", gpu="1"): "1x10",
            },
            "gpu_thermal_throttle",
            "1m",
            _alert("gpu_thermal_throttle", node="n0", gpu="0"),
        ),
        _case(
            "15s",
            {
                _name("train.loss", run="a", rank="0"): "2 1.9 NaN",
                _name("train.loss", run="b", rank="0"): "2 1.9 1.8",
            },
            "nonfinite_loss",
            "30s",
            _alert("nonfinite_loss", run="a"),
        ),
        # node n1 stops sending after 2 minutes; n0 goes on
        _case(
            "15s",
            {
                _name("host.cpu_pct", node="n0"): "50x20",
                _name("host.cpu_pct", node="n1"): "50x8 _x12",
            },
            "node_down",
            "4m",
            _alert("node_down", node="n1"),
        ),
        # free disk falling 50 GB an hour for 4 hours: from 400 GB to 200 GB, empty 4 hours
        # later (not within 2); from 280 GB to 80 GB, empty within 2 hours
        _case(
            "1m",
            {
                _name("host.disk_free_bytes", node="n0"): "400e9-833333333x240",
                _name("host.disk_free_bytes", node="n1"): "280e9-833333333x240",
            },
            "disk_filling",
            "4h",
            _alert("disk_filling", node="n1"),
        ),
        # a GPU heating 30 °C an hour from 60 °C, another steady at 70 °C
        _case(
            "15s",
            {
                _name("gpu.temp_c", node="n0", gpu="0"): "60+0.125x240",
                _name("gpu.temp_c", node="n0", gpu="1"): "70x240",
            },
            "forecast_thermal",
            "50m",
            _alert("forecast_thermal", node="n0", gpu="0"),
        ),
    ]
    spec = tmp_path / "tests.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "15s",
                                    "tests": tests}, sort_keys=False))  # fmt: skip
    tested = _promtool_run("test", "rules", str(spec))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_user_rules_are_exported_beside_the_pack(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "groups:\n- name: team\n  rules:\n"
        "  - alert: hot_inlet\n    kind: gpu_thermal\n"
        "    signal: {metric: host.inlet_temp_c, by: [node]}\n"
        "    threshold: '> 35'\n    for: 5m\n    severity: warning\n"
    )
    path, _ = _export(tmp_path, "--rules", str(mine))
    (team,) = [
        g for g in yaml.safe_load(path.read_text())["groups"] if g["name"] == "stepwatch_team"
    ]
    (rule,) = team["rules"]
    assert rule["expr"] == "max by (node) (stepwatch_host_inlet_temp_celsius) > 35"
    assert rule["for"] == "5m" and rule["labels"] == {"severity": "warning", "kind": "gpu_thermal"}
    assert _promtool_run("check", "rules", str(path)).returncode == 0


def test_names_follow_prometheus_conventions() -> None:
    assert prometheus_name("gpu.temp_c") == "stepwatch_gpu_temp_celsius"
    assert prometheus_name("train.step_time_s") == "stepwatch_train_step_time_seconds"
    assert prometheus_name("host.net_rx_bytes_per_s") == "stepwatch_host_net_rx_bytes_per_second"
    assert prometheus_name("gpu.util_pct") == "stepwatch_gpu_util_percent"
    assert prometheus_name("gpu.power_w") == "stepwatch_gpu_power_watts"
    assert prometheus_name("stepwatch.heartbeat_s") == "stepwatch_heartbeat_seconds"
    assert prometheus_name("my-team/metric.x") == "stepwatch_my_team_metric_x"
    assert export_prometheus(builtin_rules()).skipped  # some rules have no PromQL form
