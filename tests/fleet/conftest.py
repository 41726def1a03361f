"""One real RabbitMQ for the fleet's tests (a test that stops or kills it starts it again)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from _rabbitmq import Broker


@pytest.fixture(scope="package")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = Broker(tmp_path_factory.mktemp("rabbitmq")).start()
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="package")
def fleet_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file with the fleet's shared secret."""
    path = tmp_path_factory.mktemp("fleet") / "fleet.key"
    path.write_text(secrets.token_hex(32))
    return path
