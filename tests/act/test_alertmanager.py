"""The Alertmanager receiver against a real Alertmanager (Debian's prometheus-alertmanager on
a free loopback port, clustering off, its own temp storage): what is pushed is what its API
lists, and a resolved alert leaves the list."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.act import AlertmanagerReceiver, DeliveryError, Notification
from stepwatch.detect import AlertGroup, AlertState

from ._notify_parts import WAIT_S, alert

BINARY = "prometheus-alertmanager"
CONFIG = """\
route:
  receiver: nobody
receivers:
  - name: nobody
"""


@dataclass
class Alertmanager:
    url: str
    proc: subprocess.Popen[bytes]

    def alerts(self) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.url}/api/v2/alerts", timeout=WAIT_S)
        response.raise_for_status()
        found = response.json()
        assert isinstance(found, list)
        return found


@pytest.fixture
def alertmanager(tmp_path: Path, port: int, processes: Any) -> Alertmanager:
    """A real Alertmanager on loopback; stopped by PID at the end."""
    config = tmp_path / "alertmanager.yml"
    config.write_text(CONFIG)
    args = [
        f"--config.file={config}",
        f"--storage.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    url = f"http://127.0.0.1:{port}"
    proc = processes.start_daemon(BINARY, args, f"{url}/-/ready", tmp_path / "alertmanager.log")
    return Alertmanager(url, proc)


def _notification(*alerts: Any) -> Notification:
    group = AlertGroup({"kind": "straggler", "run": "r1"}, tuple(alerts))
    return Notification("am", "route:am:{}", group, "http://collector:7070")


def test_a_pushed_alert_is_listed_with_its_labels_annotations_and_link(
    alertmanager: Alertmanager,
) -> None:
    firing = alert(since=time.time() - 60, node="n1", rank="5", gpu="1")
    AlertmanagerReceiver("am", alertmanager.url).send(_notification(firing))
    (listed,) = alertmanager.alerts()
    assert listed["labels"] == {
        "alertname": "straggler",
        "kind": "straggler",
        "severity": "warning",
        "run": "r1",
        "node": "n1",
        "rank": "5",
        "gpu": "1",
    }
    assert listed["annotations"] == {
        "summary": "straggler at 1.8",
        "description": "why straggler matters",
        "playbook": "what to do about straggler",
    }
    assert listed["generatorURL"] == f"http://collector:7070/#/alerts?run=r1&alert={firing.id}"
    assert listed["status"]["state"] == "active"
    assert listed["startsAt"].startswith(time.strftime("%Y-%m-%dT", time.gmtime(firing.since)))


def test_a_resolved_alert_leaves_the_list(alertmanager: Alertmanager) -> None:
    since = time.time() - 120
    receiver = AlertmanagerReceiver("am", alertmanager.url)
    receiver.send(_notification(alert(since=since, rank="1"), alert(since=since, rank="2")))
    assert len(alertmanager.alerts()) == 2
    ended = alert(since=since, rank="1", state=AlertState.RESOLVED).but(ts=time.time() - 1)
    receiver.send(_notification(ended))
    (left,) = alertmanager.alerts()
    assert left["labels"]["rank"] == "2"


def test_a_wrong_address_is_a_failure_alertmanager_explains(alertmanager: Alertmanager) -> None:
    with pytest.raises(DeliveryError, match="HTTP 4") as caught:
        AlertmanagerReceiver("am", alertmanager.url + "/nowhere").send(_notification(alert()))
    assert not caught.value.retryable
