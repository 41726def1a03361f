"""`stepwatch alerts` and `stepwatch silence` against a real collector started with --rules."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from stepwatch.cli import main

TOKEN = "s3cret"
RULES = """\
groups:
  - name: site
    rules:
      - alert: gpu_too_hot
        kind: gpu_thermal
        signal: {metric: gpu.temp_c, by: [node, gpu]}
        threshold: "> 80"
        severity: critical
        annotations: {summary: "GPU {{ $labels.gpu }} of {{ $labels.node }} at {{ $value }} C"}
"""


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})


@pytest.fixture
def collector(collector_factory: Any, tmp_path: Path) -> Any:
    rules = tmp_path / "site.yaml"
    rules.write_text(RULES)
    return collector_factory(token=TOKEN, extra_args=("--rules", str(rules)))


def _hot_gpu(collector: Any) -> None:
    samples = [
        {"name": "gpu.temp_c", "labels": {"run": "r1", "node": "n3", "gpu": 1}, "ts": t, "value": v}
        for t, v in ((100.0, 70.0), (101.0, 91.5))
    ]
    doc = {"source": "agent-n3", "seq": 1, "samples": samples}
    response = httpx.post(f"{collector.url}/api/v1/ingest", json=doc, headers=collector.headers)
    assert response.status_code == 200
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = httpx.get(f"{collector.url}/api/v1/alerts", headers=collector.headers).json()
        if found:
            return
        time.sleep(0.05)
    raise AssertionError(f"no alert came:\n{collector.log()}")


def test_alerts_lists_what_a_rule_file_of_the_collector_raised(collector: Any) -> None:
    _hot_gpu(collector)
    result = _cli("alerts", "--server", collector.url, "--token", TOKEN)
    assert result.exit_code == 0, result.output
    assert "1 alerts" in result.output
    (row,) = [line for line in result.output.splitlines() if "gpu_thermal" in line]
    assert "firing" in row and "critical" in row and "node=n3" in row
    assert "GPU 1 of n3 at 91.5 C" in row
    result = _cli("alerts", "--server", collector.url, "--token", TOKEN, "--state", "resolved")
    assert result.exit_code == 0 and "0 alerts" in result.output
    result = _cli("alerts", "--server", collector.url, "--token", TOKEN, "--group-by", "kind,node")
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if "kind=gpu_thermal" in line]
    assert "node=n3" in row and "critical" in row and "1 groups" in result.output


def test_alerts_without_the_token_fails_with_the_collectors_reason(collector: Any) -> None:
    result = _cli("alerts", "--server", collector.url)
    assert result.exit_code == 1
    assert "401" in result.output and "bearer token" in result.output


def test_silence_add_list_and_expire(collector: Any) -> None:
    server = ("--server", collector.url, "--token", TOKEN)
    added = _cli(
        "silence",
        "add",
        "node=n3",
        "kind=~gpu_.*",
        "--duration",
        "2h",
        "--comment",
        "reboot",
        *server,
    )
    assert added.exit_code == 0, added.output
    match = re.search(r"silence (\w+) until", added.output)
    assert match is not None
    silence_id = match.group(1)
    listed = _cli("silence", "list", *server)
    assert listed.exit_code == 0
    (row,) = [line for line in listed.output.splitlines() if silence_id in line]
    assert "node=n3 kind=~gpu_.*" in row and "reboot" in row and "yes" in row
    _hot_gpu(collector)
    shown = _cli("alerts", *server)
    assert "firing (silenced)" in shown.output
    expired = _cli("silence", "expire", silence_id, *server)
    assert expired.exit_code == 0 and f"silence {silence_id} expired" in expired.output
    assert silence_id not in _cli("silence", "list", *server).output
    everything = _cli("silence", "list", "--all", *server)
    (row,) = [line for line in everything.output.splitlines() if silence_id in line]
    assert " no " in row


def test_silence_add_refuses_a_bad_duration_or_matcher(collector: Any) -> None:
    server = ("--server", collector.url, "--token", TOKEN)
    result = _cli("silence", "add", "node=n3", "--duration", "forever", *server)
    assert result.exit_code == 2 and "expected a duration like" in result.output
    result = _cli("silence", "add", "node", "--duration", "1h", *server)
    assert result.exit_code == 1 and "LABEL=VALUE" in result.output
    assert _cli("silence", "expire", "nope", *server).exit_code == 1


def test_server_refuses_a_rule_file_with_a_mistake(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(RULES.replace('"> 80"', '"above 80"'))
    result = _cli("server", "--rules", str(bad), "--store", str(tmp_path / "s.duckdb"))
    assert result.exit_code == 1
    assert f"{bad}:" in result.output and "threshold" in result.output
    assert not (tmp_path / "s.duckdb").exists()
