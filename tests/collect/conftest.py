"""Fixtures for the collect tests: a real node_exporter on loopback, and exposition files."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
NODE_EXPORTER = "prometheus-node-exporter"
READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0
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


def _binary() -> str:
    found = shutil.which(NODE_EXPORTER) or shutil.which(f"/usr/bin/{NODE_EXPORTER}")
    if found is None:
        pytest.fail(f"{NODE_EXPORTER} is not installed: run scripts/system-deps")
    return found


def _wait_ready(exporter: NodeExporter, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while exporter.proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(exporter.url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"node_exporter did not answer on {exporter.url}:\n{log.read_text()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate by PID, kill if it lingers; never leave it running."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


@pytest.fixture
def node_exporter(tmp_path: Path, port: int) -> Iterator[NodeExporter]:
    """A real ``prometheus-node-exporter`` on a free loopback port; stopped at teardown."""
    args = [
        _binary(),
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.disable-exporter-metrics",
        "--collector.disable-defaults",
        *(f"--collector.{name}" for name in COLLECTORS),
    ]
    log = tmp_path / "node_exporter.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    exporter = NodeExporter(proc, f"http://127.0.0.1:{port}/metrics")
    try:
        _wait_ready(exporter, log)
        yield exporter
    finally:
        _stop(proc)
