"""The auth seam: named tokens with roles, refused tokens, sessions for the page, the first
admin token, open probes, and no route without an access declaration."""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter

from stepwatch.auth import Permission
from stepwatch.server import CollectorOptions, ServerThread, create_app, is_loopback
from stepwatch.server._auth import include, need
from stepwatch.store import Store
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

from .conftest import make_batch

SWB = {"Content-Type": BINARY_CONTENT_TYPE}


@pytest.fixture(scope="module")
def collector(module_collector_factory: Any) -> Any:
    return module_collector_factory(auth=True)


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/series", "/api/v1/events"])
@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing bearer token"),
        ({"Authorization": "Bearer swt_wrong"}, "unknown token"),
        ({"Authorization": "Basic abc"}, "missing bearer token"),
    ],
)
def test_routes_refuse_without_a_valid_token(
    collector: Any, path: str, headers: dict[str, str], message: str
) -> None:
    refused = httpx.get(collector.url + path, headers=headers)
    assert refused.status_code == 401
    assert message in refused.json()["error"]
    assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert httpx.get(collector.url + path, headers=collector.headers_of("viewer")).is_success


def test_an_ingest_token_writes_but_neither_reads_nor_steers(collector: Any) -> None:
    ingest = collector.headers_of("ingest")
    assert httpx.post(collector.url + "/api/v1/runs", json={"id": "r1"}, headers=ingest).is_success
    body = encode_batch(make_batch(source="auth-ingest"))
    assert httpx.post(collector.url + "/api/v1/ingest", content=body, headers=ingest | SWB).json()[
        "applied"
    ]
    assert httpx.get(collector.url + "/api/v1/runs", headers=ingest).status_code == 403
    silence = {"matchers": ["node=node0"], "duration_s": 60}
    refused = httpx.post(collector.url + "/api/v1/silences", json=silence, headers=ingest)
    assert refused.status_code == 403 and "needs operate" in refused.json()["error"]


def test_a_viewer_reads_but_neither_writes_nor_administers(collector: Any) -> None:
    viewer = collector.headers_of("viewer")
    body = encode_batch(make_batch(source="auth-viewer"))
    sent = httpx.post(collector.url + "/api/v1/ingest", content=body, headers=viewer | SWB)
    assert sent.status_code == 403
    assert httpx.get(collector.url + "/api/v1/tokens", headers=viewer).status_code == 403
    assert httpx.get(collector.url + "/api/v1/tokens", headers=collector.headers).is_success


def test_tokens_made_through_the_api_are_shown_once_and_revocable(collector: Any) -> None:
    admin = collector.headers
    made = httpx.post(
        collector.url + "/api/v1/tokens",
        json={"role": "viewer", "projects": ["default"], "name": "short-lived"},
        headers=admin,
    )
    assert made.status_code == 201
    secret = made.json()["token"]
    listed = httpx.get(collector.url + "/api/v1/tokens", headers=admin).text
    assert secret not in listed and "short-lived" in listed
    mine = {"Authorization": f"Bearer {secret}"}
    assert httpx.get(collector.url + "/api/v1/runs", headers=mine).is_success
    gone = httpx.delete(collector.url + "/api/v1/tokens/short-lived", headers=admin)
    assert gone.is_success and gone.json()["revoked"] is not None
    refused = httpx.get(collector.url + "/api/v1/runs", headers=mine)
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]


def test_probes_and_the_page_shell_are_open_and_the_schema_is_not(collector: Any) -> None:
    for path in ("/healthz", "/readyz", "/", "/ui/app.js"):
        assert httpx.get(collector.url + path).status_code == 200, path
    assert set(httpx.get(collector.url + "/readyz").json()) == {"status"}
    for path in ("/openapi.json", "/docs"):
        assert httpx.get(collector.url + path).status_code == 401, path
        assert httpx.get(collector.url + path, headers=collector.headers_of("viewer")).is_success


def test_a_session_cookie_stands_for_the_token_and_needs_its_csrf_secret(collector: Any) -> None:
    with httpx.Client(base_url=collector.url) as page:
        signed = page.post(
            "/api/v1/session", json={"token": collector.tokens["operator", "default"]}
        )
        assert signed.is_success
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        csrf = signed.json()["csrf"]
        me = page.get("/api/v1/session").json()
        assert (me["name"], me["role"], me["projects"]) == (
            "operator-default",
            "operator",
            ["default"],
        )
        assert page.get("/api/v1/runs").is_success
        silence = {"matchers": ["node=nodeX"], "duration_s": 60}
        forged = page.post("/api/v1/silences", json=silence)
        assert forged.status_code == 403 and "x-csrf-token" in forged.json()["error"]
        assert (
            page.post("/api/v1/silences", json=silence, headers={"X-CSRF-Token": csrf}).status_code
            == 201
        )
        assert page.delete("/api/v1/session").is_success
        assert page.get("/api/v1/runs").status_code == 401


def test_signing_in_with_a_wrong_token_opens_nothing(collector: Any) -> None:
    refused = httpx.post(collector.url + "/api/v1/session", json={"token": "swt_guess"})
    assert refused.status_code == 401 and "set-cookie" not in refused.headers


def test_the_first_start_with_auth_writes_an_admin_token_only_its_owner_reads(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.duckdb"
    with ServerThread(store, CollectorOptions(port=0, auth=True)) as server:
        written = server.admin_token_file
        assert written is not None and stat.S_IMODE(written.stat().st_mode) == 0o600
        admin = {"Authorization": f"Bearer {written.read_text().strip()}"}
        assert httpx.get(server.url + "/api/v1/tokens", headers=admin).is_success
    with ServerThread(store, CollectorOptions(port=0, auth=True)) as again:
        assert again.admin_token_file is None  # an admin token exists: none is made


def test_the_server_command_says_where_the_admin_token_is(tmp_path: Path, port: int) -> None:
    store = tmp_path / "s.duckdb"
    cmd = [sys.executable, "-m", "stepwatch.cli", "server", "--store", str(store)]
    with subprocess.Popen(
        [*cmd, "--port", str(port), "--auth"], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        proc.stdout.readline()  # listening on ...
        said = proc.stdout.readline()
        proc.terminate()
        proc.communicate(timeout=60)
    assert f"admin token written to {store}.admin-token (readable only by you)" in said


def test_a_router_with_an_undeclared_route_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        app = create_app(store)
    router = APIRouter()
    router.add_api_route("/api/v1/forgotten", lambda: {}, methods=["GET"])
    with pytest.raises(RuntimeError, match=r"declaration: \['GET'\] /api/v1/forgotten"):
        include(app, router)
    router.dependencies.append(need(Permission.READ))
    include(app, router)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.1.2.3", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_public_address_turns_auth_on_and_turning_it_off_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "stepwatch.server"):
        with ServerThread(
            tmp_path / "s.duckdb", CollectorOptions(host="0.0.0.0", port=0)
        ) as server:
            url = server.url.replace("0.0.0.0", "127.0.0.1")
            assert httpx.get(url + "/api/v1/runs").status_code == 401
        assert not caplog.records
        with ServerThread(
            tmp_path / "s.duckdb", CollectorOptions(host="0.0.0.0", port=0, auth=False)
        ):
            pass
    (record,) = caplog.records
    assert "without --auth" in record.getMessage()
