"""HostSource on this machine's real psutil: sane values, and a real child process's life."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from stepwatch.collect._host import HostSource
from stepwatch.collect._source import Reading

ALLOCATED = 64 << 20
#: Touches its pages (so they count in RSS), says so, then waits for stdin to close.
CHILD = (
    f"import sys; block = b'x' * {ALLOCATED}; print('ready', flush=True); "
    "sys.stdin.read(); sys.exit(3)"
)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    args = [sys.executable, "-c", CHILD]
    with subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc
        if proc.poll() is None:
            proc.kill()


def by_name(reading: Reading) -> dict[str, float]:
    return {s.name: s.value for s in reading.samples if not s.labels}


def proc_samples(reading: Reading, pid: int) -> dict[str, float]:
    return {s.name: s.value for s in reading.samples if s.labels == {"pid": str(pid)}}


def test_values_are_sane(tmp_path: Path) -> None:
    host = HostSource(paths=[tmp_path])
    host.watch_pid(os.getpid(), children=False)
    first = host.read(time.time())
    sum(i * i for i in range(200_000))  # some CPU time for this process
    time.sleep(0.05)
    second = host.read(time.time())
    host.close()

    assert not first.events and not second.events
    got = by_name(second)
    assert got["host.mem_total_bytes"] > 0
    assert 0 < got["host.mem_used_bytes"] <= got["host.mem_total_bytes"]
    assert 0 <= got["host.cpu_pct"] <= got["host.cpu_core_max_pct"] + 1e-9  # mean <= max
    assert got["host.cpu_core_max_pct"] <= 100
    for name in ("host.net_rx_bytes_per_s", "host.net_tx_bytes_per_s"):
        assert got[name] >= 0
    free = [s for s in second.samples if s.name == "host.disk_free_bytes"]
    assert [(s.labels, s.value > 0) for s in free] == [({"path": str(tmp_path)}, True)]
    mine = proc_samples(second, os.getpid())
    assert mine["host.proc_rss_bytes"] > 10 << 20
    assert 0 <= mine["host.proc_cpu_pct"] <= 100 * (psutil.cpu_count() or 1)
    assert "host.net_rx_bytes_per_s" not in by_name(first) and "host.cpu_pct" not in by_name(first)


def test_a_child_appears_with_its_rss_and_its_exit_is_one_event(
    child: subprocess.Popen[str],
) -> None:
    host = HostSource()
    host.watch_pid(os.getpid(), children=True)
    reading = host.read(time.time())
    assert proc_samples(reading, child.pid)["host.proc_rss_bytes"] >= ALLOCATED
    assert child.pid in host.watched

    child.communicate("")  # closes stdin, waits, reaps
    exits = host.read(time.time()).events
    assert [(e.kind, e.labels, e.data["pid"]) for e in exits] == [
        ("process_exit", {"pid": str(child.pid)}, child.pid)
    ]
    assert not host.read(time.time()).events
    assert child.pid not in host.watched and os.getpid() in host.watched


def test_the_owner_of_a_child_supplies_its_exit_code(child: subprocess.Popen[str]) -> None:
    host = HostSource()
    host.watch_pid(child.pid, returncode=child.poll)
    assert proc_samples(host.read(time.time()), child.pid)
    assert child.stdin is not None
    child.stdin.close()
    deadline = time.monotonic() + 10
    exits: list[object] = []
    while not exits and time.monotonic() < deadline:
        exits = [e.data["exit"] for e in host.read(time.time()).events]
        time.sleep(0.01)
    assert exits == [3]
