"""When the store refuses or fails a batch, the client gets a JSON error, never a hang or a 200."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from stepwatch.model import SampleBatch
from stepwatch.server import create_app
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
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
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
