"""Fixtures for the collect tests: a real node_exporter on loopback, and exposition files."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
NODE_EXPORTER = "prometheus-node-exporter"
#: Only the collectors the mapping reads: quicker scrapes, nothing that needs privileges.
COLLECTORS = ("cpu", "meminfo", "netdev", "diskstats", "filesystem")


def exposition(name: str) -> str:
    """The text of one fixture file under fixtures/."""
    return (FIXTURES / name).read_text()


@dataclass
class NodeExporter:
    """A node_exporter process listening on loopback."""

    proc: subprocess.Popen[bytes]
    url: str


@pytest.fixture
def node_exporter(tmp_path: Path, port: int, processes: Any) -> NodeExporter:
    """A real ``prometheus-node-exporter`` on a free loopback port; stopped at teardown."""
    args = [
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.disable-exporter-metrics",
        "--collector.disable-defaults",
        *(f"--collector.{name}" for name in COLLECTORS),
    ]
    url = f"http://127.0.0.1:{port}/metrics"
    proc = processes.start_daemon(NODE_EXPORTER, args, url, tmp_path / "node_exporter.log")
    return NodeExporter(proc, url)
