"""docs/operations.md as written: its table lists exactly the metrics a collector exposes,
its refusal reasons are those ingest counts, and its scrape config is one Prometheus accepts."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from conftest import poll

from stepwatch.server import CollectorOptions, ServerThread

from ._readme import ROOT, blocks

PAGE = ROOT / "docs" / "operations.md"
#: Ingest and the checks of every writing route it makes first.
INGEST = [ROOT / "src" / "stepwatch" / "server" / f for f in ("_ingest.py", "_body.py")]
NOTIFY = """\
receivers:
  - name: somewhere
    type: webhook
    url: http://127.0.0.1:9/
route:
  receiver: somewhere
"""


def _table_names() -> set[str]:
    """The names in the first column of the metrics table."""
    return set(re.findall(r"^\| `(stepwatch_\w+)` \|", PAGE.read_text(), re.MULTILINE))


def _once_detected(text: str) -> str:
    """The scrape, or "" while detection has not seen a sample (its lag is not known yet)."""
    return text if "\nstepwatch_detection_lag_seconds " in text else ""


def test_the_table_lists_every_metric_the_collector_exposes(tmp_path: Path) -> None:
    (tmp_path / "notify.yaml").write_text(NOTIFY)
    store = tmp_path / "s.duckdb"
    nowhere = ("http://127.0.0.1:9/api/v1/write",)  # forwarding's figures, to no receiver
    options = CollectorOptions(port=0, notify=tmp_path / "notify.yaml", remote_write=nowhere)
    with ServerThread(store, options) as server:
        doc = {"source": "s", "seq": 1, "samples": [{"name": "loss", "ts": 1.0, "value": 1.0}]}
        assert httpx.post(f"{server.url}/api/v1/ingest", json=doc).is_success
        assert httpx.post(f"{server.url}/api/v1/ingest", json={}).status_code == 400
        text = poll(lambda: _once_detected(httpx.get(f"{server.url}/metrics").text))
    exposed = set(re.findall(r"^# TYPE (stepwatch_\w+) ", text, re.MULTILINE))
    exposed.remove("stepwatch_writer_commit_seconds_created")  # prometheus_client's own
    assert exposed - _table_names() == set(), "exposed, not in docs/operations.md"
    assert _table_names() - exposed == set(), "in docs/operations.md, not exposed"


def test_the_reasons_are_those_ingest_counts() -> None:
    documented = set(re.findall(r"^\| \d{3} \| `(\w+)` \|", PAGE.read_text(), re.MULTILINE))
    named = {r for f in INGEST for r in re.findall(r'reason="(\w+)"', f.read_text())}
    named |= {"queue_full", "shutting_down"}  # chosen by the exception's class
    assert named <= documented
    assert documented - named == {"unauthorized", "forbidden", "internal"}  # from the status


def test_the_scrape_config_is_one_prometheus_accepts(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: run scripts/system-deps")
    (config,) = [b.text for b in blocks(PAGE.read_text()) if "scrape_configs" in b.text]
    for name in ("stepwatch-ca.pem", "stepwatch.token"):
        (tmp_path / name).write_text("-")
    path = tmp_path / "prometheus.yml"
    path.write_text(config.replace("/etc/prometheus/", f"{tmp_path}/"))
    checked = subprocess.run([promtool, "check", "config", str(path)], capture_output=True)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
