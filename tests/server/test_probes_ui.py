"""Probes and the web page: /healthz, /readyz (503 when the writer is not running), GET /."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from stepwatch.server import create_app
from stepwatch.store import Store


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
