"""`stepwatch alerts` and `stepwatch silence` against a real collector started with --rules."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _chat_model import chat_model
from click.testing import CliRunner, Result
from conftest import poll

from stepwatch.cli import main

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
PLAYBOOKS = """\
playbooks:
  - name: cordon
    kind: command
    argv: [echo, "{node}"]
    dry_run: false
    triggers: [gpu_thermal]
    description: take the node out of the pool
"""
#: What the analyst model answers: markup and an escape sequence a table must show as text.
ANSWER = "[bold]GPU 1 of n3[/] ran hot: \x1b[31mcooling\x1b[0m failed.\nPLAYBOOK: cordon"


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})


@pytest.fixture
def collector(collector_factory: Any, tmp_path: Path) -> Any:
    rules = tmp_path / "site.yaml"
    rules.write_text(RULES)
    return collector_factory(auth=True, extra_args=("--rules", str(rules)))


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


def _local_minute(ts: float) -> str:
    """How a time reads in the tables: local, to the minute, with its zone."""
    return dt.datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M %Z")


def _cells(row: str) -> list[str]:
    """The cells of one line of a table."""
    return [cell.strip() for cell in row.split("│")[1:-1]]


def test_alerts_lists_what_a_rule_file_of_the_collector_raised(collector: Any) -> None:
    _hot_gpu(collector)
    result = _cli("alerts", "--server", collector.url, "--token", collector.token)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("1 alert ")
    (row,) = [line for line in result.output.splitlines() if "gpu_thermal" in line]
    _, state, severity, kind, labels, since, summary = _cells(row)
    assert (state, severity, kind) == ("firing", "critical", "gpu_thermal")
    assert labels == "gpu=1 node=n3 run=r1" and summary == "GPU 1 of n3 at 91.5 C"
    assert re.fullmatch(rf"{_local_minute(101.0)} \(\d+d \d\dh ago\)", since), since
    result = _cli(
        "alerts", "--server", collector.url, "--token", collector.token, "--state", "resolved"
    )
    assert result.exit_code == 0 and result.output == "0 alerts\n"  # no empty box
    result = _cli(
        "alerts", "--server", collector.url, "--token", collector.token, "--group-by", "kind,node"
    )
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if "kind=gpu_thermal" in line]
    assert "node=n3" in row and "critical" in row and result.output.startswith("1 group ")


def test_alerts_as_json_are_the_apis_objects(collector: Any) -> None:
    _hot_gpu(collector)
    server = ("--server", collector.url, "--token", collector.token)
    result = _cli("alerts", *server, "--json")
    assert result.exit_code == 0, result.output
    api = httpx.get(f"{collector.url}/api/v1/alerts", headers=collector.headers).json()
    assert json.loads(result.output) == api and len(api) == 1
    grouped = _cli("alerts", *server, "--group-by", "kind", "--json")
    assert grouped.exit_code == 0, grouped.output
    (group,) = json.loads(grouped.output)
    assert group["labels"] == {"kind": "gpu_thermal"} and group["alerts"] == api


def test_grouping_by_a_label_no_alert_has_is_refused(collector: Any) -> None:
    args = (
        "alerts",
        "--server",
        collector.url,
        "--token",
        collector.token,
        "--group-by",
        "kind,nod",
    )
    nothing = _cli(*args)  # no alerts yet: no label is known to be wrong
    assert nothing.exit_code == 0 and nothing.output == "0 groups\n"
    _hot_gpu(collector)
    result = _cli(*args)
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "Error: Invalid value for --group-by: no alert has the label 'nod'; "
        "group by kind, severity or their labels: gpu, node, run"
    )


def test_alerts_without_the_token_fails_with_the_collectors_reason(collector: Any) -> None:
    result = _cli("alerts", "--server", collector.url)
    assert result.exit_code == 1
    assert "401" in result.output and "bearer token" in result.output


def test_a_wrong_token_is_refused_in_one_line_that_does_not_show_it(collector: Any) -> None:
    wrong = "sw_" + "guessed" * 6
    for args in (("alerts",), ("top", "--once"), ("token", "list")):
        result = _cli(*args, "--server", collector.url, "--token", wrong)
        assert result.exit_code == 1 and wrong not in result.output
        (line,) = result.output.splitlines()
        assert line.startswith("Error: GET /api/v1/") and line.endswith(": HTTP 401: unknown token")


def test_a_collector_nobody_runs_is_one_line_saying_what_to_do(port: int) -> None:
    url = f"http://127.0.0.1:{port}"
    for args in (("alerts",), ("top", "--once")):
        result = _cli(*args, "--server", url)
        assert result.exit_code == 1 and result.exception is not None
        assert result.output == (
            f"Error: cannot reach the collector at {url} (connection refused): "
            "start one (stepwatch server) or name it with --server URL\n"
        )


def test_silence_add_list_and_expire(collector: Any) -> None:
    server = ("--server", collector.url, "--token", collector.token)
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
    match = re.fullmatch(
        r"silence (\w+) until (.+) \(in 2h 00m\): node=n3 kind=~gpu_.*\n", added.output
    )
    assert match is not None, added.output
    silence_id = match.group(1)
    (made,) = httpx.get(f"{collector.url}/api/v1/silences", headers=collector.headers).json()
    assert match.group(2) == _local_minute(made["ends"])  # a time people read, not an epoch
    listed = _cli("silence", "list", *server)
    assert listed.exit_code == 0
    (row,) = [line for line in listed.output.splitlines() if silence_id in line]
    assert "node=n3 kind=~gpu_.*" in row and "reboot" in row and "yes" in row
    (as_json,) = json.loads(_cli("silence", "list", "--json", *server).output)
    assert as_json["id"] == silence_id and as_json["comment"] == "reboot"
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
    server = ("--server", collector.url, "--token", collector.token)
    result = _cli("silence", "add", "node=n3", "--duration", "forever", *server)
    assert result.exit_code == 2 and "expected a duration like" in result.output
    result = _cli("silence", "add", "node", "--duration", "1h", *server)
    assert result.exit_code == 1 and "LABEL=VALUE" in result.output
    assert _cli("silence", "expire", "nope", *server).exit_code == 1


def test_server_refuses_a_rule_file_with_a_mistake(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(RULES.replace('"> 80"', '"above 80"').replace("critical", "urgent"))
    result = _cli("server", "--rules", str(bad), "--store", str(tmp_path / "s.duckdb"))
    assert result.exit_code == 1
    assert [line.split(": ")[:2] for line in result.output.splitlines()] == [
        ["Error", f"{bad}:7"],  # every mistake, a line each
        [f"{bad}:8", "groups[0].rules[0].severity"],
    ]
    assert "groups[0].rules[0].threshold: expected a comparison" in result.output
    assert not (tmp_path / "s.duckdb").exists()


def test_alerts_as_incidents_name_the_root_cause(collector: Any) -> None:
    _hot_gpu(collector)
    said = _cli("alerts", "--incidents", "--server", collector.url, "--token", collector.token)
    assert said.exit_code == 0, said.output
    assert "1 incident" in said.output
    assert "gpu_thermal gpu=1 node=n3" in said.output
    assert "a hardware or storage alert; on n3" in said.output
    (row,) = [line for line in said.output.splitlines() if "gpu_thermal" in line]
    assert _cells(row)[-2:] == ["", ""]  # no playbooks configured, no analyst
    as_json = _cli("alerts", "--incidents", "--json", "--server", collector.url,
                   "--token", collector.token)  # fmt: skip
    (incident,) = json.loads(as_json.output)
    assert incident["root_cause"]["alert"]["kind"] == "gpu_thermal" and incident["open"]
    assert incident["playbooks"] == [] and "analysis" not in incident


def test_incidents_show_their_playbooks_and_the_start_of_the_models_analysis(
    collector_factory: Any, tmp_path: Path
) -> None:
    rules, playbooks = tmp_path / "site.yaml", tmp_path / "playbooks.yaml"
    rules.write_text(RULES)
    playbooks.write_text(PLAYBOOKS)
    with chat_model(ANSWER) as model:
        args = ("--rules", str(rules), "--playbooks", str(playbooks), "--analyst", model.url)
        collector = collector_factory(
            auth=True, extra_args=(*args, "--analyst-model", "test-model")
        )
        _hot_gpu(collector)
        api = httpx.Client(base_url=f"{collector.url}/api/v1", headers=collector.headers)
        with api:
            (incident,) = api.get("/alerts/incidents").json()
            asked = api.post(f"/alerts/incidents/{incident['id']}/analysis")
            assert asked.status_code == 202, asked.text
            analysed = poll(
                lambda: [i for i in api.get("/alerts/incidents").json() if "analysis" in i]
            )
    assert analysed, f"the model's analysis did not come:\n{collector.log()}"
    server = ("--server", collector.url, "--token", collector.token)
    said = _cli("alerts", "--incidents", *server)
    assert said.exit_code == 0, said.output
    (row,) = [line for line in said.output.splitlines() if "gpu_thermal" in line]
    playbook, analysis = _cells(row)[-2:]
    assert playbook == "cordon:pending"  # destructive: its action waits for an approval
    # the model's first line as it wrote it: no markup read, no escape sequence passed
    assert analysis == "test-model: [bold]GPU 1 of n3[/] ran hot: [31mcooling[0m failed."
    assert "\x1b" not in said.output and "PLAYBOOK" not in said.output
    (as_json,) = json.loads(_cli("alerts", "--incidents", "--json", *server).output)
    assert as_json["analysis"]["text"] == ANSWER
    assert as_json["playbooks"][0]["status"] == "pending"
