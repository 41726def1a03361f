"""Probes and the web page: /healthz, /readyz (503 when the writer is not running, or while
detection catches up after a restart), GET /."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import poll

from stepwatch.model import SampleBatch
from stepwatch.server import CollectorOptions, ServerThread, create_app
from stepwatch.store import Position, Store


def test_probes_answer_when_running(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_readyz_is_503_while_the_writer_is_not_running(tmp_path: Path) -> None:
    """Without its lifespan (never started, or already shut down) the app is alive, not ready."""

    async def probe(app: object) -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            return await client.get("/healthz"), await client.get("/readyz")

    with Store(tmp_path / "s.duckdb") as store:
        health, ready = asyncio.run(probe(create_app(store)))
    assert health.status_code == 200
    assert ready.status_code == 503
    assert "writer is not running" in ready.json()["error"]


def test_the_page_loads_with_its_script(client: httpx.Client) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    for element in ('id="view"', 'id="message"', "uPlot.iife.min.js", 'src="/ui/app.js"'):
        assert element in page.text
    script = client.get("/ui/app.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    for use in ("/runs/summary", "/stream", "dataset: { view"):
        assert use in script.text
    api = client.get("/ui/js/api.js").text  # the session cookie, never a token the page keeps
    assert "X-CSRF-Token" in api and "Authorization" not in api and "Storage" not in api
    assert "http://" not in script.text and "https://" not in script.text + page.text


def test_openapi_lists_the_api(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/api/v1/ingest",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/finish",
        "/api/v1/series",
        "/api/v1/query/raw",
        "/api/v1/query/downsample",
        "/api/v1/query/percentiles",
        "/api/v1/query/latest",
        "/api/v1/events",
        "/healthz",
        "/readyz",
    } <= set(paths)


def test_openapi_declares_the_refusals_the_api_sends(client: httpx.Client) -> None:
    """Every refusal is ``{"error": ...}`` with a declared status; none is FastAPI's 422."""
    schema = client.get("/openapi.json").json()
    operations = [op for ops in schema["paths"].values() for op in ops.values()]
    for operation in operations:
        assert {"400", "401", "403", "404"} <= set(operation["responses"])
        assert "422" not in operation["responses"]
    body = schema["components"]["schemas"]["ErrorBody"]
    assert body["required"] == ["error"] and body["properties"]["error"]["type"] == "string"
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    ingest = schema["paths"]["/api/v1/ingest"]["post"]
    assert {"413", "415", "503"} <= set(ingest["responses"])
    assert {"application/json", "application/x-stepwatch-batch"} == set(
        ingest["requestBody"]["content"]
    )
    assert "409" in schema["paths"]["/api/v1/actions/{action_id}/approve"]["post"]["responses"]


def test_readyz_is_503_until_detection_has_caught_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loss_doc: Any
) -> None:
    """Restarted, the collector takes batches at once but is ready only once the detector has
    replayed what the store took since its checkpoint (held here until the test lets it go)."""
    path = tmp_path / "s.duckdb"
    with ServerThread(path, CollectorOptions(port=0)) as first:
        httpx.post(f"{first.url}/api/v1/ingest", json=loss_doc(1, "r1", [1.0] * 5, 1e9))
    held, replay = threading.Event(), Store.batches_since

    def paced(self: Store, start: Position, end: Position | None = None) -> Iterator[SampleBatch]:
        held.wait(30)
        yield from replay(self, start, end)

    monkeypatch.setattr(Store, "batches_since", paced)
    with ServerThread(path, CollectorOptions(port=0)) as second:
        waiting = httpx.get(f"{second.url}/readyz")
        taken = httpx.post(f"{second.url}/api/v1/ingest", json=loss_doc(2, "r1", [1.0], 1e9 + 5))
        held.set()
        ready = poll(lambda: httpx.get(f"{second.url}/readyz").is_success)
    assert (waiting.status_code, waiting.json()["error"]) == (
        503,
        "not ready: restoring detection state",
    )
    assert taken.status_code == 200 and ready
