"""GET /runs/{id}/advice over a real store and HTTP: a run's data wait, memory pressure,
checkpoints and idle start-up come back as advice with their numbers; a healthy run gets
none; another project's run answers as an unknown one."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

T0, GPUS, TOTAL_BYTES = 1_780_000_000.0, 2, 80e9


def _samples(
    run: str, name: str, ts: np.ndarray, value: Any, labels: dict[str, str], stepped: bool = False
) -> list[Any]:
    """One sample of ``name`` at each of ``ts`` (the i-th at step i when ``stepped``)."""
    values = np.broadcast_to(np.asarray(value, np.float64), ts.shape)
    return [
        {"name": name, "labels": {"run": run, **labels}, "ts": t, "value": v}
        | ({"step": i} if stepped else {})
        for i, (t, v) in enumerate(zip(ts.tolist(), values.tolist(), strict=True))
    ]


def _send(
    client: httpx.Client,
    run: str,
    config: dict[str, Any],
    *,
    wait_s: np.ndarray | float,
    mem_share: float,
    first_step_s: float = 60.0,
    steps: int = 600,
    checkpoint_every: int = 0,
    project: str = "p",
) -> None:
    """A run of 1 s steps on node0 (rank 0) after ``first_step_s`` of start-up, its two GPUs
    busy (idle before the first step) at ``mem_share`` of their memory, its host at 40 % CPU,
    and a 30 s checkpoint write every ``checkpoint_every`` steps."""
    doc = {"id": run, "project": project, "config": config, "start": T0}
    assert client.post("/api/v1/runs", json=doc).is_success
    step_ts = T0 + first_step_s + np.arange(steps, dtype=np.float64)
    rank = {"node": "node0", "rank": "0"}
    samples = _samples(run, "train.step_time_s", step_ts, 1.0, rank, stepped=True)
    samples += _samples(run, "train.data_time_s", step_ts, wait_s, rank, stepped=True)
    if checkpoint_every:
        at = step_ts[checkpoint_every::checkpoint_every]
        samples += _samples(run, "ckpt.write_s", at, 30.0, rank)
    every_10s = T0 + np.arange(0.0, step_ts[-1] - T0, 10.0)
    util = np.where(every_10s < step_ts[0], 0.0, 90.0)
    for gpu in map(str, range(GPUS)):
        on = {"node": "node0", "gpu": gpu}
        samples += _samples(run, "gpu.util_pct", every_10s, util, on)
        samples += _samples(run, "gpu.mem_used_bytes", every_10s, mem_share * TOTAL_BYTES, on)
        samples += _samples(run, "gpu.mem_total_bytes", every_10s, TOTAL_BYTES, on)
    samples += _samples(run, "host.cpu_pct", every_10s, 40.0, {"node": "node0"})
    sent = client.post("/api/v1/ingest", json={"source": run, "seq": 1, "samples": samples})
    assert sent.is_success, sent.text


def _advice(client: httpx.Client, run: str) -> dict[str, Any]:
    got = client.get(f"/api/v1/runs/{run}/advice")
    assert got.status_code == 200, got.text
    answer: dict[str, Any] = got.json()
    assert answer["run"] == run
    return answer


def test_data_wait_memory_pressure_and_frequent_checkpoints_are_advised(
    client: httpx.Client,
) -> None:
    config = {"batch_size": 8, "gradient_accumulation_steps": 2, "num_workers": 4}
    _send(client, "r1", config, wait_s=0.3, mem_share=0.95, checkpoint_every=100)
    got = _advice(client, "r1")
    measured = got["measured"]
    assert measured["step_s"] == 1.0 and measured["data_wait_s"] == 0.3
    assert measured["gpu_mem_peak"] == pytest.approx(0.95) and measured["gpus"] == GPUS
    assert measured["host_cpu_pct"] == 40.0 and measured["failures"] == 0
    assert measured["ckpt_write_s"] == 30.0 and measured["ckpt_interval_s"] == 100.0
    # both GPUs idle until the first step at 60 s, read every 10 s in finer buckets
    assert measured["startup_idle_gpu_s"] == pytest.approx(GPUS * 60.0, abs=GPUS * 10.0)
    items = {a["kind"]: a for a in got["advice"]}
    assert list(items) == ["memory_pressure", "checkpoint_interval", "dataloader_workers"]
    memory = items["memory_pressure"]
    assert memory["measurements"]["gpu_mem_peak_pct"] == pytest.approx(95.0)
    assert (memory["change"]["from"], memory["change"]["to"]) == (8, 4)
    assert (memory["change"]["and"]["from"], memory["change"]["and"]["to"]) == (2, 4)
    workers = items["dataloader_workers"]
    assert workers["measurements"]["data_wait_pct"] == pytest.approx(30.0)
    assert workers["change"] == {"setting": "num_workers", "from": 4, "to": 6,
                                 "scale": pytest.approx(1 / 0.7)}  # fmt: skip
    ckpt = items["checkpoint_interval"]  # the fleet's MTBF over 2 GPUs: 9e7 s
    assert ckpt["measurements"]["interval_advised_s"] == pytest.approx(np.sqrt(2 * 30 * 9e7))
    assert "fleet default" in ckpt["why"]


def test_a_healthy_run_gets_no_advice(client: httpx.Client) -> None:
    _send(client, "r2", {"batch_size": 8}, wait_s=0.02, mem_share=0.7)
    got = _advice(client, "r2")
    assert got["advice"] == [] and got["measured"]["data_wait_s"] == 0.02


def test_the_advice_reads_the_recent_steps_not_the_whole_history(client: httpx.Client) -> None:
    # an hour of waiting for data, then 40 minutes without: the loader was fixed
    wait = np.where(np.arange(6000) < 3600, 0.5, 0.0)
    _send(client, "r3", {"num_workers": 4}, wait_s=wait, mem_share=0.7, steps=6000)
    got = _advice(client, "r3")
    assert got["measured"]["data_wait_s"] == 0.0 and got["advice"] == []


def test_gpus_idle_through_a_long_start_up_are_counted(client: httpx.Client) -> None:
    _send(client, "r4", {}, wait_s=0.0, mem_share=0.7, first_step_s=1200.0, steps=1200)
    (item,) = _advice(client, "r4")["advice"]
    assert item["kind"] == "idle_gpus"
    # two GPUs idle for the first 1,200 s of some 2,400 s: 2/3 GPU-hours, half the GPU time
    assert item["measurements"]["startup_idle_gpu_hours"] == pytest.approx(2 / 3, rel=0.05)
    assert item["measurements"]["training_idle_gpu_hours"] == 0.0
    assert item["measurements"]["idle_pct"] == pytest.approx(50.0, rel=0.05)


def test_an_unknown_run_is_404(client: httpx.Client) -> None:
    got = client.get("/api/v1/runs/nope/advice")
    assert got.status_code == 404 and "unknown run" in got.json()["error"]


@pytest.fixture(scope="module")
def secured(module_collector_factory: Any) -> Any:
    collector = module_collector_factory(auth=True)
    with httpx.Client(base_url=collector.url, headers=collector.headers, timeout=30) as root:
        _send(root, "theirs", {}, wait_s=0.3, mem_share=0.95, project="other")
    return collector


def test_another_projects_run_is_404_and_a_role_without_read_403(secured: Any) -> None:
    url = f"{secured.url}/api/v1/runs/theirs/advice"
    assert httpx.get(url, headers=secured.headers_of("viewer", "default")).status_code == 404
    theirs = httpx.get(url, headers=secured.headers_of("viewer", "other"))
    assert theirs.status_code == 200 and theirs.json()["advice"]
    assert httpx.get(url, headers=secured.headers_of("ingest", "other")).status_code == 403
    assert httpx.get(url).status_code == 401
