"""Running the collector: ServerThread in-process, serve() in its own process, the public API."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import stepwatch.server
from stepwatch.server import ServerThread
from stepwatch.store import Store
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

from .conftest import make_batch


def test_server_thread_serves_and_stop_drains_and_closes_the_store(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with ServerThread(path, port=0) as server:
        assert server.url.startswith("http://127.0.0.1:")
        body = encode_batch(make_batch(n=100))
        headers = {"Content-Type": BINARY_CONTENT_TYPE}
        ack = httpx.post(server.url + "/api/v1/ingest", content=body, headers=headers)
        assert ack.json()["applied"] is True
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url + "/healthz")
    with Store(path) as store:  # closed by stop(), else this second open would be refused
        stats = store.stats()
    assert stats["samples"] == 200
    assert stats["uncompacted"] == 0


def test_a_busy_port_is_reported_to_the_caller(tmp_path: Path) -> None:
    with ServerThread(tmp_path / "a.duckdb", port=0) as first:
        port = int(first.url.rsplit(":", 1)[1])
        with pytest.raises(OSError):
            ServerThread(tmp_path / "b.duckdb", port=port).start()
    with Store(tmp_path / "b.duckdb"):
        pass  # the failed start closed its store


def test_sigterm_shuts_the_process_down_cleanly(server) -> None:
    body = encode_batch(make_batch(n=50))
    headers = {"Content-Type": BINARY_CONTENT_TYPE}
    assert httpx.post(server.url + "/api/v1/ingest", content=body, headers=headers).is_success
    assert server.stop() == 0
    assert f"listening on {server.url}" in server.log()
    with Store(server.store_path) as store:
        assert store.stats()["samples"] == 100


def test_public_api() -> None:
    assert sorted(stepwatch.server.__all__) == [
        "Auth",
        "DEFAULT_MAX_BODY_BYTES",
        "ServerThread",
        "create_app",
        "is_loopback",
        "serve",
    ]
