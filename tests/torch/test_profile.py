"""Profiles of a real CPU training: the next N steps under torch.profiler, the trace uploaded
to a real collector with its run, rank and steps, asked for by the program or by the
collector's ``profile`` command; kept in a file without a collector."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import torch

import stepwatch
from stepwatch.torch import control, profile


def _training() -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)

    def step(run: stepwatch.Run, i: int) -> None:
        with run.step(i):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()

    return model, optimizer, step


def _events(trace: bytes) -> list[dict[str, Any]]:
    return list(json.loads(gzip.decompress(trace))["traceEvents"])


def _profiler_steps(trace: bytes) -> list[str]:
    return sorted(
        e["name"] for e in _events(trace) if e.get("name", "").startswith("ProfilerStep#")
    )


def test_the_next_steps_are_profiled_and_uploaded_with_run_rank_and_steps(
    server: Any, tmp_path: Path
) -> None:
    run = stepwatch.init(project="p", run_id="prof", server=server.url, dir=tmp_path,
                         labels={"rank": 3}, heartbeat_s=None)  # fmt: skip
    _, optimizer, step = _training()
    captured = profile(optimizer, run, steps=3)  # one step of wait, one of warm-up
    for i in range(10):
        step(run, i)
    assert captured.done.wait(60)
    run.finish()
    assert captured.uploaded is not None and captured.kept is None
    with httpx.Client(base_url=server.url, timeout=10) as api:
        (kept,) = api.get("/api/v1/runs/prof/profiles").json()
        assert {k: kept[k] for k in ("id", "rank", "first_step", "steps")} == {
            "id": captured.uploaded["id"], "rank": "3", "first_step": 2, "steps": 3,
        }  # fmt: skip
        trace = api.get(f"/api/v1/runs/prof/profiles/{kept['id']}").content
    assert _profiler_steps(trace) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::addmm" for e in _events(trace))


def test_stepwatch_profile_asks_the_run_and_downloads_its_trace(
    server: Any, tmp_path: Path
) -> None:
    """The CLI sends the collector's ``profile`` command; control() obeys it in the loop."""
    run = stepwatch.init(project="p", run_id="asked", server=server.url, dir=tmp_path,
                         heartbeat_s=None)  # fmt: skip
    _, optimizer, step = _training()
    out = tmp_path / "trace.json.gz"
    with control(run, optimizer=optimizer, interval_s=0.05):
        httpx.post(f"{server.url}/api/v1/runs", json={"id": "asked", "project": "p"})
        asked = subprocess.Popen(
            [sys.executable, "-m", "stepwatch.cli", "profile", "asked", "--steps", "2",
             "--wait", "60", "--out", str(out), "--server", server.url],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        i = 0
        while asked.poll() is None:
            step(run, i)
            i += 1
    said = asked.communicate()[0]
    run.finish()
    assert asked.returncode == 0, said
    assert "asked run asked to profile 2 steps" in said and str(out) in said
    assert len(_profiler_steps(out.read_bytes())) == 2
    command = httpx.get(f"{server.url}/api/v1/runs/asked/commands").json()[0]
    assert (command["action"], command["status"]) == ("profile", "ok")


def test_without_a_collector_the_trace_stays_in_a_file(tmp_path: Path) -> None:
    run = stepwatch.init(project="p", run_id="offline", dir=tmp_path, heartbeat_s=None)
    _, optimizer, step = _training()
    captured = profile(optimizer, run, steps=1, wait=0)
    for i in range(3):
        step(run, i)
    assert captured.done.wait(60)
    run.finish()
    assert captured.uploaded is None and captured.kept is not None
    assert _profiler_steps(captured.kept.read_bytes()) == ["ProfilerStep#1"]


def test_a_trace_waits_for_a_collector_that_is_down_for_a_while(
    server: Any, tmp_path: Path
) -> None:
    run = stepwatch.init(project="p", run_id="patient", server=server.url, dir=tmp_path,
                         heartbeat_s=None)  # fmt: skip
    _, optimizer, step = _training()
    step(run, 0)
    server.stop()
    captured = profile(optimizer, run, steps=1, wait=0)
    for i in range(1, 4):
        step(run, i)
    time.sleep(1.0)  # the upload is being tried
    assert not captured.done.is_set()
    server.start()
    assert captured.done.wait(60)
    run.finish()
    assert captured.uploaded is not None and captured.kept is None
    listed = httpx.get(f"{server.url}/api/v1/runs/patient/profiles", timeout=10).json()
    assert [p["id"] for p in listed] == [captured.uploaded["id"]]
