"""Scraping a real node_exporter gives host.* values that agree with psutil's."""

from __future__ import annotations

import time

import psutil

from stepwatch.collect._scrape import ScrapeSource
from stepwatch.collect._source import Reading

from .conftest import NodeExporter

RATES = ("host.net_rx_bytes_per_s", "host.net_tx_bytes_per_s", "host.disk_write_bytes_per_s")


def _values(reading: Reading) -> dict[str, float]:
    return {s.name: s.value for s in reading.samples if not s.labels}


def test_two_scrapes_agree_with_psutil(node_exporter: NodeExporter) -> None:
    source = ScrapeSource(node_exporter.url)
    try:
        first = source.read(time.time())
        time.sleep(0.3)
        second = source.read(time.time())
    finally:
        source.close()
    mem = psutil.virtual_memory()

    for reading in (first, second):
        assert [s.value for s in reading.samples if s.name == "scrape.up"] == [1.0]
        assert not reading.events
    assert not set(RATES) & set(_values(first)), "rates need two scrapes"
    assert "host.cpu_pct" not in _values(first)

    values = _values(second)
    assert values["host.mem_total_bytes"] == mem.total
    used_by_psutil = mem.total - mem.available
    assert used_by_psutil / 2 < values["host.mem_used_bytes"] < used_by_psutil * 2
    for name in RATES:
        assert values[name] >= 0
    assert 0 <= values["host.cpu_pct"] <= values["host.cpu_core_max_pct"] + 1e-9  # mean <= max
    assert values["host.cpu_core_max_pct"] <= 100
    free = [s for s in second.samples if s.name == "host.disk_free_bytes"]
    assert free and all(s.value > 0 and s.labels["path"] for s in free)
    assert all(
        not s.labels or s.name == "host.disk_free_bytes" or s.name.startswith("scrape.")
        for s in second.samples
    ), "node_exporter's device, cpu and mode labels must not leak into host series"
