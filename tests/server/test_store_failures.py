"""When the store refuses or fails a batch, the client gets a JSON error, never a hang or a 200."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.model import SampleBatch
from stepwatch.server import CollectorOptions, create_app
from stepwatch.store import Store
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

from .conftest import make_batch


class FailingStore(Store):
    """A real store whose apply raises the exception it is given."""

    failure: Exception = RuntimeError("disk on fire")

    def apply(self, batches: Sequence[SampleBatch]) -> list[bool]:
        raise self.failure


def ingest_into(store: Store) -> httpx.Response:
    """POST one batch through the app with its lifespan (writer thread) running."""
    app = create_app(store)

    async def scenario() -> httpx.Response:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            local = "http://127.0.0.1"
            async with httpx.AsyncClient(transport=transport, base_url=local) as client:
                return await client.post(
                    "/api/v1/ingest",
                    content=encode_batch(make_batch()),
                    headers={"Content-Type": BINARY_CONTENT_TYPE},
                )

    return asyncio.run(scenario())


@pytest.mark.parametrize(
    ("failure", "status", "message"),
    [
        (ValueError("negative series index"), 400, "batch rejected: negative series index"),
        (RuntimeError("disk on fire"), 500, "internal error (RuntimeError)"),
    ],
)
def test_store_failures_become_json_errors(
    tmp_path: Path, failure: Exception, status: int, message: str
) -> None:
    with FailingStore(tmp_path / "s.duckdb") as store:
        store.failure = failure
        response = ingest_into(store)
    assert response.status_code == status
    assert message in response.json()["error"]


class HoldingStore(Store):
    """A real store whose commits wait until the test lets them through."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        self.release = threading.Event()

    def apply(self, batches: Sequence[SampleBatch]) -> list[bool]:
        self.entered.set()
        self.release.wait(timeout=60)
        return super().apply(batches)


def test_a_full_write_queue_answers_503_with_retry_after_and_stores_nothing(
    tmp_path: Path,
) -> None:
    def post(client: httpx.AsyncClient, seq: int) -> Any:
        body = encode_batch(make_batch(seq=seq))
        headers = {"Content-Type": BINARY_CONTENT_TYPE}
        return client.post("/api/v1/ingest", content=body, headers=headers)

    async def scenario(store: HoldingStore) -> list[httpx.Response]:
        app = create_app(store, CollectorOptions(max_queued_rows=len(make_batch()) + 1))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                held = asyncio.create_task(post(c, 1))
                await asyncio.to_thread(store.entered.wait, 30)
                waiting = asyncio.create_task(post(c, 2))
                await asyncio.sleep(0.2)  # let it reach the queue
                refused = await post(c, 3)
                store.release.set()
                return [await held, await waiting, refused, await post(c, 3)]

    with HoldingStore(tmp_path / "s.duckdb") as store:
        held, waiting, refused, again = asyncio.run(scenario(store))
    assert refused.status_code == 503
    assert int(refused.headers["Retry-After"]) >= 1
    assert "queue is full" in refused.json()["error"]
    assert [r.json()["applied"] for r in (held, waiting, again)] == [True, True, True]
