"""A real Prometheus (Debian's ``prometheus``) scrapes a collector with auth on, with the
token of a viewer, and its query API gives back the samples the collector ingested; a job
without a token is refused (``up`` is 0), as the collector answers it 401."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from conftest import Collector, Processes, free_port, poll

PROMETHEUS = "prometheus"
T0 = 1_780_000_000.0
CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: stepwatch
    authorization:
      credentials_file: {token_file}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
  - job_name: stepwatch-without-token
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


@dataclass
class Prometheus:
    """A Prometheus server on loopback and the collector it scrapes."""

    url: str
    collector: Collector

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` (an empty list until it has been scraped)."""
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def value(self, expr: str) -> float | None:
        found = self.query(expr)
        return float(found[0]["value"][1]) if len(found) == 1 else None


@pytest.fixture(scope="module")
def prometheus(
    module_collector_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    """One Prometheus for the module, with a data dir and a config file of its own, scraping
    one collector every second; stopped by PID at the end."""
    collector = module_collector_factory(auth=True)
    home = tmp_path_factory.mktemp("prometheus")
    token_file = home / "token"
    token_file.write_text(collector.tokens["viewer", "default"])
    config = home / "prometheus.yml"
    config.write_text(CONFIG.format(token_file=token_file, port=collector.port))
    port = free_port()
    args = [
        f"--config.file={config}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    started = Processes()
    url = f"http://127.0.0.1:{port}"
    try:
        started.start_daemon(PROMETHEUS, args, f"{url}/-/ready", home / "prometheus.log")
        yield Prometheus(url, collector)
    finally:
        started.stop_all()


def _ingest(collector: Collector, seq: int, n: int) -> None:
    samples = [
        {"name": "loss", "labels": {"run": "scraped"}, "step": i, "ts": T0 + i, "value": 1.0}
        for i in range(n)
    ]
    doc = {"source": "scraped", "seq": seq, "samples": samples}
    url, headers = f"{collector.url}/api/v1/ingest", collector.headers  # a token of every project
    answer = httpx.post(url, json=doc, headers=headers, timeout=30)
    assert answer.json()["applied"] is True, answer.text


def test_prometheus_scrapes_what_was_ingested(prometheus: Prometheus) -> None:
    _ingest(prometheus.collector, 1, 7)
    _ingest(prometheus.collector, 2, 5)
    expr = 'stepwatch_ingest_samples_total{job="stepwatch",format="json"}'
    assert poll(lambda: prometheus.value(expr) == 12), prometheus.query(expr)
    assert prometheus.value('up{job="stepwatch"}') == 1
    batches = 'stepwatch_ingest_batches_total{job="stepwatch",format="json"}'
    assert prometheus.value(batches) == 2
    commits = 'stepwatch_writer_commit_seconds_count{job="stepwatch"}'
    assert (prometheus.value(commits) or 0) >= 2


def test_a_scrape_without_a_token_is_refused(prometheus: Prometheus) -> None:
    refused = 'up{job="stepwatch-without-token"}'
    assert poll(lambda: prometheus.value(refused) == 0), prometheus.query(refused)
    assert prometheus.query('stepwatch_ready{job="stepwatch-without-token"}') == []
