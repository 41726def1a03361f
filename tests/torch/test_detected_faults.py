"""The built-in pack, as the collector runs it, on a real CPU training: a data stage that makes
every 20 ms step six times slower, and host memory that fills within minutes. Both must raise
their alert while the fault is going on, long before the run ends."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from stepwatch.sdk import Run
from stepwatch.torch import watch

STEP_KINDS = {"step_time_regression", "dataloader_bottleneck"}


def _firing(url: str, run: str, kinds: set[str], since: float = 0.0) -> list[dict[str, Any]]:
    """The run's alerts of these kinds that fire on a condition that began from ``since``."""
    alerts = httpx.get(f"{url}/api/v1/alerts", params={"run": run, "state": "all"}, timeout=10)
    return [
        a
        for a in alerts.json()
        if a["kind"] in kinds and a["state"] == "firing" and a["since"] >= since
    ]


class Training:
    """A small regression model on the CPU, one thread, about 20 ms a step."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(256, 1024), torch.nn.Tanh(), torch.nn.Linear(1024, 256)
        )
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.mix = torch.randn(256, 256) / 16

    def batch(self, augment: int) -> torch.Tensor:
        """A fresh batch; ``augment`` rounds of CPU-bound preprocessing on it."""
        x = torch.randn(256, 256)
        for _ in range(augment):
            x = torch.tanh(x @ self.mix)
        return x

    def step(self, augment: int = 0) -> float:
        started = time.perf_counter()
        x = self.batch(augment)
        self.optimizer.zero_grad()
        self.model(x).pow(2).mean().backward()
        self.optimizer.step()
        return time.perf_counter() - started

    def rounds_for(self, seconds: float) -> int:
        """How many rounds of preprocessing take about ``seconds`` on this machine now."""
        started = time.perf_counter()
        self.batch(200)
        return max(1, round(200 * seconds / (time.perf_counter() - started)))


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Steps of a steady length: torch on one thread, as it was before afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
def test_a_data_stage_that_makes_every_step_six_times_slower_is_found_while_it_lasts(
    server: Any, tmp_path: Path
) -> None:
    # one process: no RANK, so no rank label
    run = Run(name="slow data", server=server.url, dir=tmp_path, environ={}, heartbeat_s=None)
    training = Training()
    found: list[dict[str, Any]] = []
    try:
        with watch(training.model, training.optimizer, run):
            healthy = [training.step() for _ in range(300)]
            slow_from = time.time()
            augment = training.rounds_for(5 * statistics.median(healthy))  # 6x the step
            for i in range(1500):
                training.step(augment)
                if i % 25 == 24:  # what the slow steps raised (a busy machine may slow the others)
                    found = _firing(server.url, run.id, STEP_KINDS, since=slow_from - 1.0)
                if "step_time_regression" in {a["kind"] for a in found}:
                    break
            slow_steps = i + 1
    finally:
        run.finish()
    assert "step_time_regression" in {a["kind"] for a in found}, server.log()
    assert slow_steps <= 600  # held for steps, not for 10 minutes of wall time


def test_host_memory_that_fills_within_minutes_is_found_before_the_run_ends(
    server: Any, tmp_path: Path
) -> None:
    """Data time runs 30 times faster than the test (the run's clock), so that 8 minutes of a
    run take 16 s: memory at 40 % for 6 minutes, then full within 4."""
    began, pace = time.time(), 30.0
    run = Run(
        name="leak", server=server.url, dir=tmp_path, environ={}, heartbeat_s=None,
        wall_clock=lambda: began + pace * (time.time() - began),
    )  # fmt: skip
    training, total = Training(), 64 * 1024**3
    leak_from, fill_s = began + 360.0, 240.0
    found: list[dict[str, Any]] = []
    try:
        with watch(training.model, training.optimizer, run):
            while (now := began + pace * (time.time() - began)) < leak_from + fill_s:
                training.step()
                used = total * min(1.0, 0.4 + 0.6 * max(0.0, now - leak_from) / fill_s)
                run.log({"host.mem_used_bytes": used, "host.mem_total_bytes": total})
                time.sleep(max(0.0, 5.0 / pace - 0.02))  # a reading every 5 s of the run
                if now > leak_from and (found := _firing(server.url, run.id, {"host_memory_leak"})):
                    break
    finally:
        run.finish()
    assert found, server.log()
    (alert,) = found
    assert alert["rule"] == "host_memory_filling"
    assert leak_from < alert["ts"] <= leak_from + 150.0  # 2.5 minutes in, before it is full
