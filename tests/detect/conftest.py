"""Fixtures the live-detection tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stepwatch.detect import LiveDetector


@pytest.fixture
def started() -> Iterator[list[LiveDetector]]:
    """Detectors a test starts; each is stopped at the end."""
    running: list[LiveDetector] = []
    yield running
    for live in running:
        live.stop()
