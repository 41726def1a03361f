"""The auth seam: with a token every route but the probes' /healthz and the page shell needs it."""

from __future__ import annotations

import logging

import httpx
import pytest

from stepwatch.server import ServerThread, is_loopback
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

from .conftest import LiveFactory, make_batch

TOKEN = "s3cret-token"
GOOD = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/series", "/readyz", "/api/v1/events"])
@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing bearer token"),
        ({"Authorization": "Bearer wrong"}, "wrong bearer token"),
        ({"Authorization": f"Basic {TOKEN}"}, "missing bearer token"),
    ],
)
def test_routes_refuse_without_the_token(
    live_factory: LiveFactory, path: str, headers: dict[str, str], message: str
) -> None:
    url = live_factory(token=TOKEN).url
    refused = httpx.get(url + path, headers=headers)
    assert refused.status_code == 401
    assert message in refused.json()["error"]
    assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert httpx.get(url + path, headers=GOOD).status_code == 200


def test_ingest_needs_the_token_and_stores_nothing_without(live_factory: LiveFactory) -> None:
    url = live_factory(token=TOKEN).url + "/api/v1/ingest"
    body = encode_batch(make_batch())
    swb = {"Content-Type": BINARY_CONTENT_TYPE}
    assert httpx.post(url, content=body, headers=swb).status_code == 401
    assert httpx.post(url, content=body, headers={**swb, **GOOD}).json()["applied"] is True


def test_liveness_and_page_shell_stay_open(live_factory: LiveFactory) -> None:
    url = live_factory(token=TOKEN).url
    assert httpx.get(url + "/healthz").status_code == 200
    assert httpx.get(url + "/").status_code == 200
    assert httpx.get(url + "/ui/app.js").status_code == 200


def test_the_collector_process_takes_its_token_from_the_command_line(collector_factory) -> None:
    collector = collector_factory(token=TOKEN)
    assert httpx.get(collector.url + "/api/v1/runs").status_code == 401
    assert httpx.get(collector.url + "/api/v1/runs", headers=GOOD).json() == []


def test_without_a_token_everything_is_open(client: httpx.Client) -> None:
    assert client.get("/api/v1/runs").status_code == 200


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


def test_an_open_collector_on_a_public_address_warns(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "stepwatch.server"):
        with ServerThread(tmp_path / "s.duckdb", "0.0.0.0", 0, token=TOKEN):
            pass
        assert not caplog.records
        with ServerThread(tmp_path / "s.duckdb", "0.0.0.0", 0):
            pass
    (record,) = caplog.records
    assert "without a token" in record.getMessage()
