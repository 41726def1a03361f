"""The `stepwatch` command: each subcommand reaches its layer; failures give exit codes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pyarrow.parquet as pq
from click.testing import CliRunner

import stepwatch
from stepwatch.cli import main
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
    with httpx.Client(base_url=server.url, timeout=5) as client:
        (series,) = client.get("/api/v1/series", params={"run": "offline-1"}).json()
        raw = client.get("/api/v1/query/raw", params={"series": series["id"]}).json()
    assert raw["value"] == [float(i) for i in range(50)]


def test_sync_to_an_unreachable_collector_exits_non_zero(tmp_path: Path) -> None:
    with stepwatch.init(run_id="offline-2", dir=tmp_path) as run:
        run.log({"loss": 1.0}, step=0)
    args = ["sync", str(tmp_path), "--server", "http://127.0.0.1:9", "--timeout", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1


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
    result = CliRunner().invoke(main, ["rules", "check", str(good)])
    assert result.exit_code == 0 and f"{good}: 2 rules OK" in result.output
    result = CliRunner().invoke(main, ["rules", "check", str(good), str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:9: groups[0].rules[1].detector.shfit: detector 'cusum' takes no parameter" in (
        result.output
    )
