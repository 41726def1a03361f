"""Remote write into a real Prometheus (Debian's, with its remote-write receiver) on loopback:
what a collector stored, queried back through Prometheus' own API, is the same samples, under
Prometheus names; a receiver that is down at first gets them once it is up, the collector's
/metrics counting the retries; ingest never waited. Samples Prometheus refuses, and those
beyond the queue's bound, are counted dropped."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from conftest import Collector, CollectorFactory, Processes, free_port, poll

from stepwatch.model import SampleBatch, SeriesKey
from stepwatch.tsdb import REMOTE_WRITE, Forwarder, prometheus_name

CONFIG = "global:\n  scrape_interval: 15s\n"
NOW = time.time()


@dataclass
class Prometheus:
    """A Prometheus on loopback that takes remote write."""

    url: str

    @property
    def write_url(self) -> str:
        return f"{self.url}/api/v1/write"

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        assert answer.status_code == 200, answer.text
        return list(answer.json()["data"]["result"])


def _start(processes: Processes, home: Path, port: int) -> Prometheus:
    home.mkdir(exist_ok=True)
    config = home / "prometheus.yml"
    config.write_text(CONFIG)
    url = f"http://127.0.0.1:{port}"
    args = [
        f"--config.file={config}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-remote-write-receiver",
    ]
    processes.start_daemon("prometheus", args, f"{url}/-/ready", home / "prometheus.log")
    return Prometheus(url)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    started = Processes()
    try:
        yield _start(started, tmp_path_factory.mktemp("prometheus"), free_port())
    finally:
        started.stop_all()


def _ingest(collector: Collector, run: str, seq: int, samples: list[dict[str, Any]]) -> None:
    doc = {"source": run, "seq": seq, "samples": samples}
    answer = httpx.post(f"{collector.url}/api/v1/ingest", json=doc, timeout=30)
    assert answer.json()["applied"] is True, answer.text


def _training(run: str, steps: int) -> list[dict[str, Any]]:
    """Two ranks' loss (rank 1's last one NaN) and one GPU's temperature, a second apart,
    ending a minute ago."""
    t0 = NOW - 60 - steps
    out = []
    for i in range(steps):
        for rank in (0, 1):
            value: float | str = "NaN" if (rank, i) == (1, steps - 1) else 2.0 - 0.01 * i + rank
            labels = {"run": run, "rank": str(rank), "node": "n0"}
            out.append({"name": "train.loss", "labels": labels, "step": i, "ts": t0 + i,
                        "value": value})  # fmt: skip
        labels = {"run": run, "node": "n0", "gpu": "3"}
        out.append({"name": "gpu.temp_c", "labels": labels, "ts": t0 + i, "value": 60.0 + i})
    return out


def _stored(collector: Collector, name: str, **labels: str) -> dict[float, float]:
    """What the collector stored of the series ``name`` with ``labels``: time -> value."""
    others = [f"{k}:{v}" for k, v in labels.items() if k != "run"]
    params = {"name": name, "run": labels["run"], "label": others}
    (info,) = httpx.get(f"{collector.url}/api/v1/series", params=params).json()
    raw = httpx.get(f"{collector.url}/api/v1/query/raw", params={"series": info["id"]}).json()
    return {t: float(v) for t, v in zip(raw["ts"], raw["value"], strict=True)}  # "NaN" in JSON


def _in_prometheus(prometheus: Prometheus, name: str, **labels: str) -> dict[float, float]:
    """The samples Prometheus holds of that series over the last hour: time -> value."""
    matchers = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = prometheus.query(f"{prometheus_name(name)}{{{matchers}}}[1h]")
    if len(found) != 1:
        return {}
    return {float(t): float(v) for t, v in found[0]["values"]}


def _same(stored: dict[float, float], got: dict[float, float]) -> bool:
    if sorted(got) != pytest.approx(sorted(stored), abs=1e-3) or len(got) != len(stored):
        return False
    pairs = zip(sorted(stored.items()), sorted(got.items()), strict=True)
    return all(math.isnan(a) and math.isnan(b) or a == b for (_, a), (_, b) in pairs)


def _counted(figure: str, target: str, outcome: str = "") -> str:
    """A /metrics line's name and labels: a forwarding figure of remote write to ``target``."""
    which = f'outcome="{outcome}",' if outcome else ""
    return f'stepwatch_forward_{figure}{{{which}protocol="remote write",target="{target}"}}'


def _metrics(collector: Collector) -> str:
    return httpx.get(f"{collector.url}/metrics", timeout=10).text


def _figure(text: str, line: str) -> float:
    (found,) = [row for row in text.splitlines() if row.startswith(line + " ")]
    return float(found.rsplit(" ", 1)[1])


def test_what_the_collector_stored_is_in_prometheus(
    prometheus: Prometheus, module_collector_factory: CollectorFactory
) -> None:
    collector = module_collector_factory(extra_args=("--remote-write", prometheus.write_url))
    _ingest(collector, "rw", 1, _training("rw", 120)[:200])
    _ingest(collector, "rw", 2, _training("rw", 120)[200:])
    for name, labels in (
        ("train.loss", {"run": "rw", "rank": "0", "node": "n0"}),
        ("train.loss", {"run": "rw", "rank": "1", "node": "n0"}),
        ("gpu.temp_c", {"run": "rw", "node": "n0", "gpu": "3"}),
    ):
        stored = _stored(collector, name, **labels)
        assert len(stored) == 120
        got = poll(lambda: _same(stored, _in_prometheus(prometheus, name, **labels)))  # noqa: B023
        assert got, (name, labels, _in_prometheus(prometheus, name, **labels))
    text = _metrics(collector)
    target = prometheus.url.removeprefix("http://")
    sent = _counted("samples_total", target, "sent")
    assert _figure(text, sent) == 360
    dropped = _counted("samples_total", target, "dropped")
    assert _figure(text, dropped) == 0
    pending = _counted("pending_samples", target)
    assert _figure(text, pending) == 0


def test_a_receiver_down_at_first_gets_the_samples_once_it_is_up(
    module_collector_factory: CollectorFactory, tmp_path: Path, processes: Processes
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/v1/write"
    collector = module_collector_factory(extra_args=("--remote-write", url))
    began = time.monotonic()
    _ingest(collector, "late", 1, _training("late", 30))  # acknowledged with nothing listening
    assert time.monotonic() - began < 5.0
    target = f"127.0.0.1:{port}"
    retries = _counted("retries_total", target)
    assert poll(lambda: _figure(_metrics(collector), retries) >= 1)
    pending = _counted("pending_samples", target)
    assert _figure(_metrics(collector), pending) == 90
    late = _start(processes, tmp_path / "late", port)
    labels = {"run": "late", "rank": "0", "node": "n0"}
    stored = _stored(collector, "train.loss", **labels)
    assert poll(lambda: _same(stored, _in_prometheus(late, "train.loss", **labels)), 60.0)
    sent = _counted("samples_total", target, "sent")
    assert poll(lambda: _figure(_metrics(collector), sent) == 90)


def test_samples_prometheus_refuses_are_counted_dropped(
    prometheus: Prometheus, module_collector_factory: CollectorFactory
) -> None:
    collector = module_collector_factory(extra_args=("--remote-write", prometheus.write_url))
    _ingest(collector, "ooo", 1, _training("ooo", 20))
    labels = {"run": "ooo", "rank": "0", "node": "n0"}
    assert poll(lambda: len(_in_prometheus(prometheus, "train.loss", **labels)) == 20)
    older = [{**s, "ts": s["ts"] - 600} for s in _training("ooo", 20)]  # behind what it holds
    _ingest(collector, "ooo", 2, older)
    target = prometheus.url.removeprefix("http://")
    dropped = _counted("samples_total", target, "dropped")
    assert poll(lambda: _figure(_metrics(collector), dropped) == 60)
    assert len(_in_prometheus(prometheus, "train.loss", **labels)) == 20


def test_beyond_its_bound_the_oldest_batches_waiting_are_dropped() -> None:
    writer = Forwarder("http://127.0.0.1:9/api/v1/write", REMOTE_WRITE, max_pending_samples=25)
    batches = [_batch(seq, 10) for seq in range(1, 5)]
    writer.offer(batches[:2])
    assert (writer.counts.pending, writer.counts.dropped) == (20, 0)
    writer.offer(batches[2:])  # 40 waiting: the two oldest go
    assert (writer.counts.pending, writer.counts.dropped) == (20, 20)
    with pytest.raises(ValueError, match="http"):
        Forwarder("prometheus:9090", REMOTE_WRITE)


def _batch(seq: int, n: int) -> SampleBatch:
    key = SeriesKey.of("train.loss", {"run": "r"})
    return SampleBatch("s", seq, [key], np.zeros(n, np.uint32), NOW + np.arange(n, dtype=float),
                       np.arange(n), np.ones(n))  # fmt: skip
