"""A real collector holding a run pushed through the SDK: four ranks on two nodes, their GPUs,
and alert events, on a simulated clock of one step a second that ends about now."""

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


def _push(ranks: list[Run], nodes: list[Run], clock: _Clock) -> list[dict[str, Any]]:
    """Log every step and GPU reading through the SDK; the alert events to send beside them."""
    alerts = []
    for step in range(STEPS):
        clock.now += 1.0
        for r, run in enumerate(ranks):
            data, compute, comm = 0.002 + 0.001 * r, 0.080, 0.015
            timings = {"data_time_s": data, "compute_time_s": compute, "comm_time_s": comm}
            run.log({**timings, "step_time_s": data + compute + comm}, step=step)
        ranks[0].log({"loss": loss_at(step), "lr": lr_at(step), "tokens_per_s": 2.5e6}, step=step)
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
        if step == 5:
            alerts.append(_alert("a1", "loss_spike", "firing", clock.now, "loss spiked at step 5"))
        if step == 8:
            alerts.append(_alert("a1", "loss_spike", "resolved", clock.now - 3, "loss spiked"))
        if step == 20:
            alerts.append(_alert("a2", "gpu_hot", "firing", clock.now, "GPU 1 on node1 at 91 °C"))
    return alerts


def _alert(alert_id: str, rule: str, state: str, since: float, summary: str) -> dict[str, Any]:
    """An alert transition event in the form the collector's own detection records it."""
    data = {"id": alert_id, "rule": rule, "kind": rule, "state": state, "since": since}
    data |= {"severity": "warning", "value": 1.0, "annotations": {"summary": summary}}
    return {"ts": since, "kind": "alert", "text": summary, "data": data}


def _send_alerts(url: str, run_id: str, alerts: list[dict[str, Any]]) -> None:
    """Alert events through JSON ingest (the SDK reserves an event's ``kind`` for itself)."""
    events = [{**a, "labels": {"run": run_id, "node": "node1"}} for a in alerts]
    batch = {"source": "top-tests-alerts", "seq": 1, "samples": [], "events": events}
    httpx.post(f"{url}/api/v1/ingest", json=batch).raise_for_status()


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
    """The collector with run ``top-run`` (running, 30 steps of 1000, GPUs, alert events), a
    finished run that started after it, and a running run without data that started before."""
    collector = module_collector_factory()
    clock = _Clock(time.time() - STEPS - 5)
    ranks, nodes = _runs(collector.url, tmp_path_factory.mktemp("spool"), clock, "top-run")
    try:
        _send_alerts(collector.url, "top-run", _push(ranks, nodes, clock))
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
