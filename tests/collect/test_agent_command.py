"""`stepwatch agent` as an operator runs it: a real process reading this host into a collector."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from stepwatch.model import Run
from stepwatch.spool import Spool, has_unsent, write_run
from stepwatch.wire import encode


def _get(url: str, path: str, **params: Any) -> Any:
    with httpx.Client(base_url=url, timeout=10) as client:
        response = client.get(path, params=params)
        response.raise_for_status()
        return response.json()


def _agent(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    command = [sys.executable, "-m", "stepwatch.cli", "agent", "--dir", str(tmp_path / "spool")]
    return subprocess.Popen(
        [*command, "--node", "n7", "--interval", "0.2", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _ship_logs(url: str, log: Path, proc: subprocess.Popen[bytes]) -> None:
    """Once the agent is up, append a traceback and a line; SIGTERM once all has arrived."""

    def names() -> set[str]:
        return {s["name"] for s in _get(url, "/api/v1/series")}

    _wait_for(lambda: "stepwatch.heartbeat_s" in names())  # the tail is open: it starts at the end
    with log.open("a") as f:
        f.write("Traceback (most recent call last):\n  File 'x.py', line 1\n")
        f.write("torch.OutOfMemoryError: CUDA out of memory.\nstep 10 ok\n")
    _wait_for(lambda: len(_get(url, "/api/v1/events", kind="log")) == 2)
    _wait_for(lambda: {"gpu.temp_c", "host.mem_used_bytes"} <= names())
    proc.send_signal(signal.SIGTERM)


def test_the_agent_ships_host_gpu_and_log_data_until_sigterm(server: Any, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("")
    with _agent(
        tmp_path,
        *("--server", server.url, "--gpu", "fake:2", "--log", str(log), "--path", str(tmp_path)),
    ) as proc:
        try:
            _ship_logs(server.url, log, proc)
        except BaseException:
            proc.kill()
            raise
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert b"host" in err and b"gpu" in err and b"logs" in err
    series = _get(server.url, "/api/v1/series")
    by_name = {s["name"]: s["labels"] for s in series}
    assert by_name["host.cpu_pct"] == {"node": "n7"}
    assert by_name["host.disk_free_bytes"] == {"node": "n7", "path": str(tmp_path)}
    assert {s["labels"]["gpu"] for s in series if s["name"] == "gpu.util_pct"} == {"0", "1"}
    assert "stepwatch.heartbeat_s" in by_name
    traceback, line = _get(server.url, "/api/v1/events", kind="log")
    assert traceback["data"]["exception"] == "torch.OutOfMemoryError"
    assert traceback["labels"] == {"node": "n7", "path": str(log)}
    assert line["text"] == "step 10 ok"


def test_without_a_gpu_the_agent_says_so_and_goes_on(tmp_path: Path) -> None:
    with _agent(tmp_path, "--duration", "0.5") as proc:
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    text = err.decode()
    if "no GPU metrics" in text:  # this machine has no NVIDIA driver
        assert "--gpu fake:N" in text and "gpu" not in text.split("stepwatch agent on n7:")[1]
    spooled = list((tmp_path / "spool" / "_node").iterdir())
    assert len(spooled) == 1 and spooled[0].name.startswith("agent-")


def _orphan(root: Path, run_id: str, steps: int) -> Path:
    """A run's spool as a killed trainer leaves it: records written, none sent, no lock held."""
    write_run(root / run_id, Run(id=run_id, project="orphans"))
    with Spool(root / run_id / "sdk-1-killed") as spool:
        at = np.arange(steps)
        key = ("train.loss", {"run": run_id})
        ts, series = 1.7e9 + at.astype(np.float64), np.zeros(steps, np.uint32)
        spool.append(encode("sdk-1-killed", 0, [key], at * 0.5, ts, at, series))
    return spool.path


def _steps(url: str, run_id: str) -> list[int]:
    found = _get(url, "/api/v1/series", name="train.loss", run=run_id)
    return _get(url, "/api/v1/query/raw", series=found[0]["id"])["step"] if found else []


def test_the_agent_ships_the_spools_it_finds_whose_writer_is_gone(
    server: Any, tmp_path: Path
) -> None:
    orphan = _orphan(tmp_path / "spool", "r-orphan", 10)
    with _agent(tmp_path, "--server", server.url, "--gpu", "none") as proc:
        try:
            _wait_for(lambda: _steps(server.url, "r-orphan") == list(range(10)))
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert not has_unsent(orphan)
    assert _get(server.url, "/api/v1/runs/r-orphan")["project"] == "orphans"
