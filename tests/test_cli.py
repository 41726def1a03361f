"""The `stepwatch` command: each subcommand reaches its layer; failures give exit codes."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pyarrow.parquet as pq
from click.testing import CliRunner

import stepwatch
from stepwatch.cli import main
from stepwatch.detect import read_alerts
from stepwatch.model import Run
from stepwatch.store import Store
from stepwatch.wire import decode_json


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("demo", "server", "agent", "run", "sync", "export"):
        assert command in result.output


def _store_with_run(path: Path) -> None:
    body = b'{"source": "s", "seq": 0, "samples": [{"name": "loss", "labels": {"run": "r1"},'
    body += b' "ts": 5.0, "step": 2, "value": "NaN"}]}'
    with Store(path) as store:
        store.upsert_run(Run(id="r1", start=1.0))
        store.apply([decode_json(body)])


def test_export_parquet_writes_every_sample(tmp_path: Path) -> None:
    _store_with_run(tmp_path / "s.duckdb")
    out = tmp_path / "r1.parquet"
    args = ["export", "parquet", "r1", "--store", str(tmp_path / "s.duckdb"), "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out).to_pylist()
    assert [(r["name"], r["step"], r["run"]) for r in rows] == [("train.loss", 2, "r1")]


def test_export_of_an_unknown_run_fails_clearly(tmp_path: Path) -> None:
    _store_with_run(tmp_path / "s.duckdb")
    args = ["export", "parquet", "nope", "--store", str(tmp_path / "s.duckdb")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "no run 'nope'" in result.output


def test_sync_uploads_an_offline_run(server, tmp_path: Path) -> None:
    with stepwatch.init(
        run_id="offline-1", dir=tmp_path, labels={"rank": 0}, heartbeat_s=None
    ) as run:
        for i in range(50):
            run.log({"loss": float(i)}, step=i)
    result = CliRunner().invoke(main, ["sync", str(tmp_path), "--server", server.url])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(
        r"sent \d+ batch(es)? \(50 samples\) of 1 run; nothing left to send\n", result.output
    ), result.output
    with httpx.Client(base_url=server.url, timeout=5) as client:
        (series,) = client.get("/api/v1/series", params={"run": "offline-1"}).json()
        raw = client.get("/api/v1/query/raw", params={"series": series["id"]}).json()
    assert raw["value"] == [float(i) for i in range(50)]


def test_sync_to_an_unreachable_collector_says_why_and_exits_non_zero(
    tmp_path: Path, port: int
) -> None:
    with stepwatch.init(run_id="offline-2", dir=tmp_path) as run:
        run.log({"loss": 1.0}, step=0)
    dead = f"http://127.0.0.1:{port}"  # nobody listens there
    args = ["sync", str(tmp_path), "--server", dead, "--timeout", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert re.fullmatch(
        r"Error: sent 0 batches \(0 samples\) of 1 run; 1 batch left: "
        rf"server {dead} unreachable \(connection refused\) after \d\.\d s\n",
        result.output,
    ), result.output


def test_sigterm_stops_the_demo_as_cleanly_as_ctrl_c(tmp_path: Path) -> None:
    store = tmp_path / "demo.duckdb"
    command = [sys.executable, "-m", "stepwatch.cli", "demo", "--nodes", "1", "--gpus", "2"]
    command += ["--store", str(store), "--port", "0", "--step-interval", "0.05"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        while not lines[-1].startswith(b"step "):  # a progress line: training is under way
            assert lines[-1], b"".join(lines).decode()
            lines.append(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out.decode()
    assert b"stopping" in out
    with Store(store) as opened:
        (run,) = opened.list_runs()
        assert run.status == "killed"  # stopped early, as Ctrl-C records it


def test_rules_check_accepts_a_good_file_and_points_at_a_mistake(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "groups:\n  - name: g\n    rules:\n"
        "      - alert: loss_spike\n"
        "        signal: {metric: loss}\n"
        "        detector: {type: robust_z, z: 8, halflife: 200}\n"
        "      - alert: step_time_regression\n"
        "        signal: {metric: train.step_time_s, by: [rank]}\n"
        "        detector: {type: cusum, shift: 0.3}\n"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("shift: 0.3", "shfit: 0.3"))
    one = tmp_path / "one.yaml"
    one.write_text(good.read_text().split("      - alert: step_time_regression")[0])
    result = CliRunner().invoke(main, ["rules", "check", str(good), str(one)])
    assert result.exit_code == 0
    assert result.output == f"{good}: 2 rules OK\n{one}: 1 rule OK\n"
    result = CliRunner().invoke(main, ["rules", "check", str(good), str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:9: groups[0].rules[1].detector.shfit: detector 'cusum' takes no parameter" in (
        result.output
    )


def test_rules_check_reports_every_mistake_of_a_file_in_line_order(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "groups:\n  - name: g\n    rules:\n"
        "      - alert: hot\n"
        "        severity: urgent\n"  # line 5, met after the detector below
        "        signal: {metric: gpu.temp_c, by: [node]}\n"
        "        detector: {type: cusum, shfit: 0.3}\n"  # line 7
        "      - alert: cold\n"
        "        signal: {metric: gpu.temp_c, by: [node]}\n"
        "        threshold: below 10\n"  # line 10
    )
    result = CliRunner().invoke(main, ["rules", "check", str(bad)])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"{bad}:5: groups[0].rules[0].severity: expected one of info, warning, critical, "
        "got 'urgent'",
        f"{bad}:7: groups[0].rules[0].detector.shfit: detector 'cusum' takes no parameter 'shfit'",
        f"{bad}:10: groups[0].rules[1].threshold: expected a comparison like '> 80', '< 1e-7' "
        "or '& 0x60' (any of these bits), got 'below 10'",
    ]


def _store_with_nans(path: Path) -> None:
    """Run r1 whose loss reaches 3 and then NaN, and whose gradient norm turns NaN; run r2."""
    samples = [
        {"name": name, "labels": {"run": "r1"}, "ts": 10.0 + step, "step": step, "value": value}
        for name, values in (("loss", [1.0, 3.0, "NaN"]), ("grad_norm", [1.0, 1.0, "NaN"]))
        for step, value in enumerate(values)
    ]
    samples.sort(key=lambda s: s["ts"])
    body = json.dumps({"source": "s", "seq": 0, "samples": samples}).encode()
    with Store(path) as store:
        store.upsert_run(Run(id="r1", start=1.0))
        store.upsert_run(Run(id="r2", start=2.0))
        store.apply([decode_json(body)])


SITE_RULES = """\
groups:
  - name: training
    rules:
      - alert: nonfinite_loss
        kind: loss_not_a_number
        signal: {metric: train.loss, by: [run]}
        detector: nonfinite
        severity: info
  - name: site
    rules:
      - alert: loss_high
        signal: {metric: train.loss, by: [run]}
        threshold: "> 2"
"""


def test_replay_rules_add_to_the_builtin_pack_like_the_collector(tmp_path: Path) -> None:
    _store_with_nans(tmp_path / "s.duckdb")
    rules = tmp_path / "site.yaml"
    rules.write_text(SITE_RULES)
    out = tmp_path / "alerts.jsonl"
    args = ["replay", str(tmp_path / "s.duckdb"), "--run", "r1", "--rules", str(rules)]
    result = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    found = {(a.extra["rule"], a.extra["severity"]) for a in read_alerts(out)}
    assert found == {
        ("nonfinite_loss", "info"),  # the file's rule replaced the built-in critical one
        ("nonfinite_grad_norm", "critical"),  # the rest of the built-in pack still runs
        ("loss_high", "warning"),  # and the file's own rule was added
    }
    assert "3 alerts from 6 samples" in result.output


def test_replay_of_a_store_without_run_names_the_runs_it_holds(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    _store_with_nans(store)
    result = CliRunner().invoke(main, ["replay", str(store), "--out", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {store}: a store holds many runs; name one (--run) of its 2 runs: r2, r1\n"
    )
    result = CliRunner().invoke(main, ["replay", str(store), "--run", "r9", "--score"])
    assert result.exit_code == 1
    assert result.output == f"Error: {store}: no run 'r9' in this store; its 2 runs: r2, r1\n"
    assert not (tmp_path / "a.jsonl").exists()
