"""A real collector holding a run pushed through the SDK: four ranks on two nodes, their GPUs,
and the alerts its detection raised from two rules of the tests' own, on a simulated clock of
one step a second that ends about now."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.sdk import Run

STEPS = 30
PLANNED = 1000
NODES = ("node0", "node1")
GPUS_PER_NODE = 2
READY_TIMEOUT_S = 30.0

#: Two alerts the collector raises from signals the push logs beside the real metrics: a
#: ``loss_spike`` over steps 5 to 7 (firing, then resolved) and ``gpu_hot`` from step 20 on.
RULES = """\
groups:
  - name: top-tests
    rules:
      - alert: loss_spike
        signal: {metric: test.spike, by: [run]}
        threshold: "> 0"
        severity: warning
        annotations: {summary: "loss spiked"}
      - alert: gpu_hot
        signal: {metric: test.gpu_hot_c, by: [run, node, gpu]}
        threshold: "> 90"
        severity: warning
        annotations: {summary: "GPU {{ $labels.gpu }} on {{ $labels.node }} at 91 °C"}
"""


def loss_at(step: int) -> float:
    return 4.0 * math.exp(-step / 20) + 1.0


def lr_at(step: int) -> float:
    return 3e-4 * min(1.0, (step + 1) / 10)


@dataclass
class Pushed:
    """What the fixture stored: the collector, the watched run, and two others beside it."""

    url: str
    run_id: str
    name: str
    finished_id: str
    idle_id: str

    def api(self, path: str, **params: Any) -> Any:
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        response.raise_for_status()
        return response.json()


class _Clock:
    """Wall-clock seconds that move only when told: one step takes one second."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def _runs(url: str, spool: Path, clock: _Clock, run_id: str) -> tuple[list[Run], list[Run]]:
    common: dict[str, Any] = {
        "project": "top-tests",
        "name": "top 2x2",
        "server": url,
        "dir": spool,
        "run_id": run_id,
        "planned_total_steps": PLANNED,
        "heartbeat_s": None,
        "environ": {},
        "wall_clock": clock,
    }
    ranks = [
        Run(**common, labels={"rank": r, "node": node}, hostname=node)
        for r, node in enumerate(n for n in NODES for _ in range(GPUS_PER_NODE))
    ]
    nodes = [Run(**common, labels={"node": node}, hostname=node) for node in NODES]
    return ranks, nodes


def _push(ranks: list[Run], nodes: list[Run], clock: _Clock) -> None:
    """Log every step and GPU reading through the SDK, and the signals of the two alerts."""
    for step in range(STEPS):
        clock.now += 1.0
        for r, run in enumerate(ranks):
            data, compute, comm = 0.002 + 0.001 * r, 0.080, 0.015
            timings = {"data_time_s": data, "compute_time_s": compute, "comm_time_s": comm}
            run.log({**timings, "step_time_s": data + compute + comm}, step=step)
        ranks[0].log({"loss": loss_at(step), "lr": lr_at(step), "tokens_per_s": 2.5e6}, step=step)
        ranks[0].log({"test.spike": float(5 <= step < 8)}, step=step)
        for n, run in enumerate(nodes):
            for g in range(GPUS_PER_NODE):
                readings = {
                    "gpu.util_pct": 90.0 + g,
                    "gpu.mem_used_bytes": 50e9 + n * 1e9,
                    "gpu.mem_total_bytes": 80e9,
                    "gpu.temp_c": 60.0 + 10 * n + g,
                    "gpu.power_w": 500.0,
                    "gpu.power_limit_w": 700.0,
                }
                run.log(readings, labels={"gpu": g})
        nodes[1].log({"test.gpu_hot_c": 91.0 if step >= 20 else 71.0}, labels={"gpu": 1})


def _stored(url: str, run_id: str) -> bool:
    api = f"{url}/api/v1"
    loss = httpx.get(f"{api}/query/latest", params={"name": "loss", "run": run_id}).json()
    gpus = httpx.get(f"{api}/query/latest", params={"name": "gpu.temp_c", "run": run_id}).json()
    times = httpx.get(f"{api}/query/latest", params={"name": "step_time_s", "run": run_id}).json()
    alerts = httpx.get(f"{api}/events", params={"kind": "alert", "run": run_id}).json()
    return (
        [row["step"] for row in loss] == [STEPS - 1]
        and len(gpus) == len(NODES) * GPUS_PER_NODE
        and sorted(row["step"] for row in times) == [STEPS - 1] * len(times)
        and len(times) == len(NODES) * GPUS_PER_NODE
        and len(alerts) == 3
    )


@pytest.fixture(scope="module")
def pushed(
    module_collector_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pushed]:
    """The collector with run ``top-run`` (running, 30 steps of 1000, GPUs, alerts), a
    finished run that started after it, and a running run without data that started before."""
    rules = tmp_path_factory.mktemp("rules") / "rules.yaml"
    rules.write_text(RULES)
    collector = module_collector_factory(extra_args=("--rules", str(rules)))
    clock = _Clock(time.time() - STEPS - 5)
    ranks, nodes = _runs(collector.url, tmp_path_factory.mktemp("spool"), clock, "top-run")
    try:
        _push(ranks, nodes, clock)
        api = f"{collector.url}/api/v1/runs"
        later = {"id": "later-run", "name": "finished later", "start": clock.now}
        httpx.post(api, json={**later, "status": "finished"}).raise_for_status()
        early = {"id": "idle-run", "name": "idle", "start": clock.now - 3600}
        httpx.post(api, json=early).raise_for_status()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _stored(collector.url, "top-run"):
            assert time.monotonic() < deadline, f"data not stored in time:\n{collector.log()}"
            time.sleep(0.2)
        yield Pushed(collector.url, "top-run", "top 2x2", "later-run", "idle-run")
    finally:
        for run in [*ranks[1:], *nodes, *ranks[:1]]:
            run.finish()
