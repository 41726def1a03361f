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


def _training(slow_s: float = 0.0) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
    """A small model's training; each step's compute takes ``slow_s`` longer (a slow GPU)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)

    def step(run: stepwatch.Run, i: int) -> None:
        with run.step(i):
            with run.phase("compute"):
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                if slow_s:
                    time.sleep(slow_s)
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


def _ranks(url: str, run_id: str, home: Path, count: int) -> list[stepwatch.Run]:
    """``count`` processes' handles (ranks 0...) on one run, as a job of several ranks has."""
    return [
        stepwatch.Run(project="p", run_id=run_id, server=url, dir=home / f"rank{rank}",
                      labels={"rank": rank}, flush_interval_s=0.1, heartbeat_s=None)
        for rank in range(count)
    ]  # fmt: skip


def test_stepwatch_profile_of_one_rank_profiles_that_rank_alone(
    server: Any, tmp_path: Path
) -> None:
    runs = _ranks(server.url, "ranked", tmp_path, 2)
    trainings = [_training() for _ in runs]
    controls = [
        control(r, optimizer=opt, interval_s=0.05)
        for r, (_, opt, _) in zip(runs, trainings, strict=True)
    ]
    httpx.post(f"{server.url}/api/v1/runs", json={"id": "ranked", "project": "p"})
    out = tmp_path / "trace.json.gz"
    asked = subprocess.Popen(
        [sys.executable, "-m", "stepwatch.cli", "profile", "ranked", "--steps", "2", "--rank", "1",
         "--wait", "60", "--out", str(out), "--server", server.url],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    i = 0
    while asked.poll() is None:
        for run, (_, _, step) in zip(runs, trainings, strict=True):
            step(run, i)
        i += 1
    said = asked.communicate()[0]
    for ctl, run in zip(controls, runs, strict=True):
        ctl.close()
        run.finish()
    assert asked.returncode == 0, said
    assert "asked run ranked to profile 2 steps on rank 1" in said and "trace of rank 1" in said
    assert len(_profiler_steps(out.read_bytes())) == 2
    assert [len(c.profiles) for c in controls] == [0, 1]  # rank 0 went on unprofiled
    assert [ctl.controller.applied for ctl in controls][0] == []
    listed = httpx.get(f"{server.url}/api/v1/runs/ranked/profiles", timeout=10).json()
    assert [p["rank"] for p in listed] == ["1"]
    (command,) = httpx.get(f"{server.url}/api/v1/runs/ranked/commands", timeout=10).json()
    assert (command["ranks"], command["status"], list(command["answers"])) == ([1], "ok", ["1"])


#: A straggler (the built-in rule) is profiled on its rank.
SLOW_RANK = """
policies:
  rules:
    - name: slow_rank
      kinds: [straggler]
      cooldown: 10m            # one profile is enough
      steps:
        - {action: profile, args: {steps: 2}}
"""


def test_a_policy_profiles_the_rank_a_straggler_alert_names(
    collector_factory: Any, tmp_path: Path
) -> None:
    rules = tmp_path / "policies.yaml"
    rules.write_text(SLOW_RANK)
    collector = collector_factory(extra_args=("--rules", str(rules)))
    runs = _ranks(collector.url, "straggling", tmp_path, 4)
    # every rank's compute takes milliseconds, as a GPU's does: a scheduler's hiccup on a
    # sub-millisecond step would make any rank 20 % slower than its peers for a while
    trainings = [_training(slow_s=0.02 if rank == 2 else 0.005) for rank in range(4)]
    controls = [
        control(r, optimizer=opt, interval_s=0.05)
        for r, (_, opt, _) in zip(runs, trainings, strict=True)
    ]
    for i in range(3000):  # a bound, so that a broken loop fails instead of hanging
        for run, (_, _, step) in zip(runs, trainings, strict=True):
            step(run, i)
        if controls[2].profiles and controls[2].profiles[0].done.is_set():
            break
    for ctl, run in zip(controls, runs, strict=True):
        ctl.close()
        run.finish()
    assert [len(c.profiles) for c in controls] == [0, 0, 1, 0]
    assert controls[2].profiles[0].uploaded is not None
    listed = httpx.get(f"{collector.url}/api/v1/runs/straggling/profiles", timeout=10).json()
    assert [p["rank"] for p in listed] == ["2"]
    (command,) = httpx.get(f"{collector.url}/api/v1/runs/straggling/commands", timeout=10).json()
    assert (command["action"], command["ranks"], command["by"]) == (
        "profile", [2], "policy:slow_rank",
    )  # fmt: skip
    assert command["kind"] == "straggler" and command["status"] == "ok"
