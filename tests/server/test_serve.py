"""Running the collector: ServerThread in-process, serve() in its own process, the public API."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import stepwatch.server
from stepwatch.server import CollectorOptions, ServerThread
from stepwatch.store import Store, StoreError
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

from .conftest import make_batch


def test_server_thread_serves_and_stop_drains_and_closes_the_store(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with ServerThread(path, CollectorOptions(port=0)) as server:
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


def test_a_busy_port_is_reported_before_the_store_is_touched(tmp_path: Path) -> None:
    with ServerThread(tmp_path / "a.duckdb", CollectorOptions(port=0)) as first:
        port = int(first.url.rsplit(":", 1)[1])
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: the port is in use"):
            ServerThread(tmp_path / "b.duckdb", CollectorOptions(port=port)).start()
        assert not (tmp_path / "b.duckdb").exists()


def test_elsewhere_a_busy_port_gives_way_to_a_free_one_and_says_so(tmp_path: Path) -> None:
    said: list[str] = []
    with ServerThread(tmp_path / "a.duckdb", CollectorOptions(port=0)) as first:
        port = int(first.url.rsplit(":", 1)[1])
        second = ServerThread(
            tmp_path / "b.duckdb", CollectorOptions(port=port)
        ).start_or_elsewhere(said.append)
        try:
            assert second.url != first.url and httpx.get(second.url + "/healthz").is_success
        finally:
            second.stop()
    assert said == [f"port {port} is in use; the collector listens on {second.url} instead"]


def test_the_module_entry_point_says_a_held_store_or_a_busy_port_in_one_line(
    server, tmp_path: Path, port: int
) -> None:
    """``python -m stepwatch.server``, as containers start it: one line and exit 1."""
    cases = [
        (["--store", str(server.store_path), "--port", str(port)], "in use by another"),
        (["--store", str(tmp_path / "b.duckdb"), "--port", str(server.port)], "port is in use"),
        (["--store", str(tmp_path / "b.duckdb"), "--retention", "raw=1m"], "under the 1h minimum"),
    ]
    for args, said in cases:
        done = subprocess.run(
            [sys.executable, "-m", "stepwatch.server", *args], capture_output=True, text=True
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("Error: ") and said in done.stderr
        assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "b.duckdb").exists()


def test_a_store_another_process_holds_leaves_the_port_free(server, port: int) -> None:
    with pytest.raises(StoreError, match=rf"in use by another process \(PID {server.proc.pid}\)"):
        ServerThread(server.store_path, CollectorOptions(port=port)).start()
    with socket.create_server(("127.0.0.1", port)):
        pass  # the failed start closed the socket it had bound


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
        "CALLER_HEADER",
        "CollectorOptions",
        "DEFAULT_MAX_BODY_BYTES",
        "HOP_HEADER",
        "HostAllowList",
        "ServerThread",
        "ServerTls",
        "create_app",
        "is_loopback",
        "serve",
        "store_limits",
        "store_memory_limit",
    ]
