"""Forwarding into Debian's VictoriaMetrics (remote write) and InfluxDB 1.x (line protocol), each
started on loopback with a data directory of its own: what a collector stored, queried back
through each one's own HTTP API, is the same samples (the finite ones: neither keeps a NaN)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import CollectorFactory, Processes, free_port, poll

from stepwatch.tsdb import prometheus_name

from .test_remote_write import _figure, _ingest, _metrics, _stored, _training

SERIES = (
    ("train.loss", {"run": "fw", "rank": "0", "node": "n0"}),
    ("train.loss", {"run": "fw", "rank": "1", "node": "n0"}),  # its last value NaN
    ("gpu.temp_c", {"run": "fw", "node": "n0", "gpu": "3"}),
)
INFLUX_CONFIG = """\
reporting-disabled = true
bind-address = "127.0.0.1:{rpc}"
[meta]
  dir = "{home}/meta"
[data]
  dir = "{home}/data"
  wal-dir = "{home}/wal"
[http]
  bind-address = "127.0.0.1:{port}"
  log-enabled = false
"""


@pytest.fixture(scope="module")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """VictoriaMetrics' URL."""
    home, port, started = tmp_path_factory.mktemp("victoria"), free_port(), Processes()
    url = f"http://127.0.0.1:{port}"
    args = [f"-storageDataPath={home / 'data'}", f"-httpListenAddr=127.0.0.1:{port}",
            "-search.disableCache", "-search.latencyOffset=1s"]  # fmt: skip
    try:
        started.start_daemon("victoria-metrics", args, f"{url}/health", home / "vm.log")
        yield url
    finally:
        started.stop_all()


@pytest.fixture(scope="module")
def influx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """InfluxDB's URL, with a database ``stepwatch``."""
    home, port, started = tmp_path_factory.mktemp("influx"), free_port(), Processes()
    config = home / "influxdb.conf"
    config.write_text(INFLUX_CONFIG.format(home=home, port=port, rpc=free_port()))
    url = f"http://127.0.0.1:{port}"
    try:
        started.start_daemon("influxd", ["-config", str(config)], f"{url}/query?q=SHOW%20DATABASES",
                             home / "influxd.log")  # fmt: skip
        made = httpx.post(f"{url}/query", data={"q": "CREATE DATABASE stepwatch"}, timeout=10)
        assert made.is_success, made.text
        yield url
    finally:
        started.stop_all()


def _finite(samples: dict[float, float]) -> dict[float, float]:
    return {t: v for t, v in samples.items() if math.isfinite(v)}


def _victoria(url: str, name: str, labels: dict[str, str]) -> dict[float, float]:
    matchers = ",".join(f'{k}="{v}"' for k, v in labels.items())
    answer = httpx.get(
        f"{url}/api/v1/query", params={"query": f"{prometheus_name(name)}{{{matchers}}}[1h]"}
    )
    found = answer.json()["data"]["result"]
    return {float(t): float(v) for t, v in found[0]["values"]} if len(found) == 1 else {}


def _influx(url: str, name: str, labels: dict[str, str]) -> dict[float, float]:
    where = " AND ".join(f"\"{k}\" = '{v}'" for k, v in labels.items())
    q = f'SELECT "value" FROM "{prometheus_name(name)}" WHERE {where}'
    answer = httpx.get(f"{url}/query", params={"db": "stepwatch", "q": q, "epoch": "ms"})
    (result,) = answer.json()["results"]
    rows: list[list[Any]] = result.get("series", [{}])[0].get("values", [])
    return {t / 1000.0: float(v) for t, v in rows}


def _same(stored: dict[float, float], got: dict[float, float]) -> bool:
    """The same times (to the millisecond) and values (VictoriaMetrics keeps 12 significant
    digits) as the finite samples stored."""
    want = _finite(stored)
    pairs = zip(sorted(want.items()), sorted(got.items()), strict=False)
    return len(got) == len(want) and all(
        abs(a - b) < 1e-3 and math.isclose(x, y, rel_tol=1e-11) for (a, x), (b, y) in pairs
    )


@pytest.mark.parametrize("store", ["victoria", "influx"])
def test_what_the_collector_stored_is_in_the_other_store(
    store: str, request: pytest.FixtureRequest, module_collector_factory: CollectorFactory
) -> None:
    url = request.getfixturevalue(store)
    option, read, protocol = {
        "victoria": ("--remote-write", _victoria, "remote write"),
        "influx": ("--influx-write", _influx, "line protocol"),
    }[store]
    target = url + ("/api/v1/write" if store == "victoria" else "/write?db=stepwatch")
    collector = module_collector_factory(extra_args=(option, target))
    _ingest(collector, "fw", 1, _training("fw", 120))
    for name, labels in SERIES:
        stored = _stored(collector, name, **labels)
        assert len(stored) == 120
        assert poll(lambda: _same(stored, read(url, name, labels)), 30.0), (name, labels)  # noqa: B023
    host = url.removeprefix("http://")
    counted = (
        f'stepwatch_forward_samples_total{{outcome="%s",protocol="{protocol}",target="{host}"}}'
    )
    sent, dropped = (_figure(_metrics(collector), counted % o) for o in ("sent", "dropped"))
    # remote write sends the NaN too (VictoriaMetrics keeps no NaN); a line cannot carry it
    assert (sent, dropped) == ((360, 0) if store == "victoria" else (359, 1))
