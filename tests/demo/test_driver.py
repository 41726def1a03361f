"""run_demo end to end: a small cluster streams through the SDK, spool and HTTP into the store.

Every test also leaves no thread behind (the suite's autouse check).
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from pathlib import Path

import pytest

from stepwatch.demo import GPU_METRICS, HOST_METRICS, DemoConfig, DemoSummary, run_demo
from stepwatch.model import RunStatus
from stepwatch.sdk import HEARTBEAT
from stepwatch.store import Store

TRAIN = ("train.loss", "train.lr", "train.grad_norm", "train.tokens_per_s")
TIMINGS = ("train.step_time_s", "train.data_time_s", "train.compute_time_s", "train.comm_time_s")
STEPS = 40


def _small(tmp_path: Path, **overrides: object) -> DemoConfig:
    """2 nodes x 2 GPUs, fast steps, an evaluation at step 20 and a checkpoint at step 30."""
    options: dict[str, object] = {
        "nodes": 2,
        "gpus_per_node": 2,
        "store_path": tmp_path / "demo.duckdb",
        "spool_dir": tmp_path / "spool",
        "port": 0,
        "step_interval_s": 0.01,
        "hw_interval_s": 0.1,
        "report_every_s": 0.2,
        "flush_interval_s": 0.1,
        "eval_every": 20,
        "ckpt_every": 30,
        "planned_total_steps": STEPS,
    }
    options.update(overrides)
    return DemoConfig(**options)  # type: ignore[arg-type]


def _play(config: DemoConfig, stop: threading.Event | None = None) -> tuple[DemoSummary, list[str]]:
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if stop is not None and line.startswith("step "):
            stop.set()

    return run_demo(config, out=out, stop=stop), lines


def _counts(store: Store, run_id: str) -> Counter[tuple[str, str | None, str | None, str | None]]:
    """Samples per (name, node, rank, gpu) of the run."""
    counts: Counter[tuple[str, str | None, str | None, str | None]] = Counter()
    for info in store.series(match={"run": run_id}):
        k = info.key
        counts[k.name, k.label("node"), k.label("rank"), k.label("gpu")] += len(
            store.raw(info.id)["value"]
        )
    return counts


def test_a_whole_run_reaches_the_store_from_every_rank_gpu_and_host(tmp_path: Path) -> None:
    config = _small(tmp_path)
    summary, lines = _play(config)
    assert lines[0] == (
        f"stepwatch demo: open {summary.url}/#/overview?run={summary.run_id} to watch the run live"
    )
    assert summary.status == RunStatus.FINISHED and summary.steps == STEPS
    with Store(config.store_path) as store:
        run = store.get_run(summary.run_id)
        assert run is not None and run.status == RunStatus.FINISHED
        assert run.planned_total_steps == STEPS and run.config["world_size"] == 4
        counts = _counts(store, summary.run_id)
        beats = {k[1:3] for k in counts if k[0] == HEARTBEAT}
        assert beats >= {(f"node{rank // 2}", str(rank)) for rank in range(4)}
        assert sum(n for k, n in counts.items() if k[0] != HEARTBEAT) == summary.samples
        for rank in range(4):
            node = f"node{rank // 2}"
            assert all(counts[n, node, str(rank), None] == STEPS for n in TIMINGS)
        assert all(counts[n, "node0", "0", None] == STEPS for n in TRAIN)
        for node in ("node0", "node1"):
            assert all(counts[n, node, None, str(g)] >= 1 for n in GPU_METRICS for g in (0, 1))
            assert all(counts[n, node, None, None] >= 1 for n in HOST_METRICS)
            leader = "0" if node == "node0" else "2"
            assert counts["ckpt.write_s", node, leader, None] == 1
        kinds = [e.kind for e in store.events(run=summary.run_id)]
    assert kinds == ["eval", "checkpoint"]
    assert any("evaluation after step 20" in line for line in lines)
    assert any("saved checkpoint" in line for line in lines)


def test_stop_ends_the_run_as_killed_and_a_taken_port_is_replaced(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        config = _small(tmp_path, port=port, planned_total_steps=100_000)
        summary, lines = _play(config, stop=threading.Event())
    assert any(f"port {port} is in use" in line for line in lines)
    assert summary.status == RunStatus.KILLED and summary.steps < 100_000
    with Store(config.store_path) as store:
        run = store.get_run(summary.run_id)
    assert run is not None and run.status == RunStatus.KILLED


def test_the_demo_stops_by_itself_after_its_duration(tmp_path: Path) -> None:
    summary, lines = _play(_small(tmp_path, duration_s=0.3, planned_total_steps=100_000))
    assert summary.status == RunStatus.FINISHED and 0 < summary.steps < 100_000
    assert lines[-1].startswith(f"run {summary.run_id} finished")
    assert lines[-1].endswith(  # and how to look at it once the demo's collector has stopped
        f"to look at it again: stepwatch server --store {tmp_path / 'demo.duckdb'}, "
        f"then open http://127.0.0.1:7070/#/overview?run={summary.run_id}"
    )


@pytest.mark.parametrize("field", ["duration_s", "hw_interval_s", "report_every_s"])
def test_config_refuses_non_positive_intervals(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DemoConfig(**{field: 0})  # type: ignore[arg-type]


def test_ctrl_c_finishes_the_runs_and_stops_the_collector(tmp_path: Path) -> None:
    config = _small(tmp_path, planned_total_steps=100_000)

    def out(line: str) -> None:
        if line.startswith("step "):
            raise KeyboardInterrupt

    summary = run_demo(config, out=out)
    assert summary.status == RunStatus.KILLED
    with Store(config.store_path) as store:
        run = store.get_run(summary.run_id)
    assert run is not None and run.status == RunStatus.KILLED
