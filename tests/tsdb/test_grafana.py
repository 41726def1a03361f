"""`stepwatch export grafana`: four boards and their provisioning file; every panel's query,
run by a real Prometheus over what a collector forwarded to it, finds its series."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import CollectorFactory, Processes, free_port, poll

from stepwatch.cli import main
from stepwatch.tsdb import BOARDS, board_queries

from .test_remote_write import Prometheus, _ingest, _start

#: A sample of every metric the boards read: per rank, per GPU, per node.
RANKS = {"train.step_time_s": 0.5, "train.compute_time_s": 0.3, "train.data_time_s": 0.05,
         "train.comm_time_s": 0.15, "train.loss": 2.0, "train.lr": 3e-4,
         "train.grad_norm": 1.2, "train.tokens_per_s": 9000.0}  # fmt: skip
GPUS = {"gpu.util_pct": 95.0, "gpu.temp_c": 70.0, "gpu.power_w": 600.0,
        "gpu.mem_used_bytes": 6e10, "gpu.mem_total_bytes": 8e10}  # fmt: skip
NODES = {"host.cpu_pct": 40.0, "host.mem_used_bytes": 5e11, "host.mem_total_bytes": 2e12,
         "host.net_rx_bytes_per_s": 1e9, "host.net_tx_bytes_per_s": 1e9,
         "host.disk_free_bytes": 1e12}  # fmt: skip


@pytest.fixture(scope="module")
def fed(
    tmp_path_factory: pytest.TempPathFactory, module_collector_factory: CollectorFactory
) -> Iterator[Prometheus]:
    """A Prometheus that a collector forwarded two ranks' training and hardware metrics to."""
    started = Processes()
    try:
        prometheus = _start(started, tmp_path_factory.mktemp("prometheus"), free_port())
        collector = module_collector_factory(extra_args=("--remote-write", prometheus.write_url))
        now = time.time() - 30
        samples: list[dict[str, Any]] = []
        for i in range(10):
            for rank in (0, 1):
                at = {"run": "g1", "rank": str(rank), "node": "n0", "gpu": str(rank)}
                samples += [{"name": n, "labels": at, "step": i, "ts": now + i, "value": v}
                            for n, v in RANKS.items()]  # fmt: skip
                gpu = {"node": "n0", "gpu": str(rank)}
                samples += [{"name": n, "labels": gpu, "ts": now + i, "value": v}
                            for n, v in GPUS.items()]  # fmt: skip
            samples += [{"name": n, "labels": {"node": "n0"}, "ts": now + i, "value": v}
                        for n, v in NODES.items()]  # fmt: skip
        _ingest(collector, "g1", 1, samples)
        yield prometheus
    finally:
        started.stop_all()


def test_the_boards_and_their_provisioning_are_written(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["export", "grafana", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    provider = yaml.safe_load((tmp_path / "provisioning/dashboards/stepwatch.yaml").read_text())
    (entry,) = provider["providers"]
    assert Path(entry["options"]["path"]) == (tmp_path / "dashboards").resolve()
    for uid, (title, charts) in BOARDS.items():
        doc = json.loads((tmp_path / "dashboards" / f"{uid}.json").read_text())
        assert (doc["uid"], doc["title"]) == (uid, title)
        assert [p["title"] for p in doc["panels"]] == [c.title for c in charts]
        names = [v["name"] for v in doc["templating"]["list"]]
        assert names == ["datasource", "run", "node"]
        for panel in doc["panels"]:
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"] and all(t["expr"] for t in panel["targets"])
    step = json.loads((tmp_path / "dashboards/stepwatch-step-time.json").read_text())
    exprs = [t["expr"] for t in step["panels"][0]["targets"]]
    assert [e.split(",")[0] for e in exprs] == [f"quantile by (run) ({q}" for q in (0.5, 0.9, 0.99)]


@pytest.mark.parametrize(("uid", "title", "expr"),
                         [(u, t, q.expr) for u, t, q in board_queries()])  # fmt: skip
def test_every_panel_finds_its_series_in_prometheus(
    fed: Prometheus, uid: str, title: str, expr: str
) -> None:
    query = expr.replace("$run", ".*").replace("$node", ".*")  # "All", as Grafana sends it
    assert poll(lambda: fed.query(query)), (uid, title, query)
