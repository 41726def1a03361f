"""/healthz and /readyz answer a kubelet's probe: no token with auth on, over TLS, under the
pod's address as Host; they carry no data. /readyz asks every readiness check and says the
first reason not to be ready with a 503."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from _certs import Certs
from fastapi.testclient import TestClient

from stepwatch.server import create_app
from stepwatch.server._readiness import Readiness
from stepwatch.spool import ClientTls
from stepwatch.store import Store

POD = {"Host": "10.1.2.3:7070"}  # how a kubelet reaches a pod: by its address


def test_probes_need_no_token_over_tls_under_any_host_name(
    collector_factory: Any, certs: Certs
) -> None:
    tls = ("--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key))
    collector = collector_factory(auth=True, extra_args=tls, tls=ClientTls(ca_file=certs.ca))
    with httpx.Client(base_url=collector.url, verify=collector.tls.context()) as probe:
        for headers in ({}, POD):
            assert probe.get("/healthz", headers=headers).json() == {"status": "ok"}
            assert probe.get("/readyz", headers=headers).json() == {"status": "ready"}
        assert probe.get("/metrics").status_code == 401  # figures are data: a token
        assert probe.get("/metrics", headers=POD).status_code == 421  # and a known name
        assert probe.get("/api/v1/runs", headers=POD).status_code == 421


def test_readyz_says_the_first_reason_not_to_be_ready(tmp_path: Path) -> None:
    restoring = threading.Event()
    restoring.set()
    with Store(tmp_path / "s.duckdb") as store:
        app = create_app(store)
        app.state.readiness.add(lambda: "restoring detection state" if restoring.is_set() else None)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            waiting = client.get("/readyz")
            assert waiting.status_code == 503
            assert waiting.json() == {"error": "not ready: restoring detection state"}
            assert "\nstepwatch_ready 0.0\n" in client.get("/metrics").text
            assert client.get("/healthz").status_code == 200  # alive all the same
            restoring.clear()
            assert client.get("/readyz").json() == {"status": "ready"}
            assert "\nstepwatch_ready 1.0\n" in client.get("/metrics").text
        stopped = TestClient(app, base_url="http://127.0.0.1").get("/readyz")  # no lifespan
        assert stopped.json() == {"error": "not ready: the store writer is not running"}


def _broken() -> str | None:
    raise RuntimeError("cannot tell")


def test_a_check_that_fails_is_a_reason_and_the_rest_are_not_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    asked: list[str] = []
    readiness = Readiness(lambda: None, _broken, lambda: asked.append("third") or None)
    assert readiness.not_ready() == "a readiness check failed (RuntimeError)"
    assert asked == []
    assert "readiness check" in caplog.text
    assert Readiness(lambda: None, lambda: "").not_ready() is None  # empty: no reason
