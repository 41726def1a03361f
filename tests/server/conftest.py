"""Fixtures of the server tests: batches with known contents and an in-process collector."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from stepwatch.model import NO_STEP, Event, SampleBatch, SeriesKey
from stepwatch.server import CollectorOptions, ServerThread

#: Values that must survive the round trip bit for bit, non-finite ones included.
AWKWARD = [1.5, math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 0.1]

MakeBatch = Callable[..., SampleBatch]


def make_batch(
    source: str = "src",
    seq: int = 1,
    run: str = "r1",
    n: int = 8,
    t0: float = 1_780_000_000.0,
    events: tuple[Event, ...] = (),
) -> SampleBatch:
    """Two series of one run: ``train.loss`` (with steps, awkward values) and ``gpu.temp_c``."""
    keys = [
        SeriesKey.of("train.loss", {"run": run, "rank": 0}),
        SeriesKey.of("gpu.temp_c", {"run": run, "node": "node0", "gpu": 0}),
    ]
    series = np.tile(np.array([0, 1], np.uint32), n)
    ts = t0 + np.repeat(np.arange(n, dtype=np.float64), 2)
    step = np.where(series == 0, np.repeat(np.arange(n, dtype=np.int64), 2), NO_STEP)
    value = np.empty(2 * n)
    value[0::2] = np.resize(np.array(AWKWARD), n)
    value[1::2] = 40.0 + np.arange(n)
    return SampleBatch(source, seq, keys, series, ts, step, value, list(events))


@pytest.fixture
def batch_factory() -> MakeBatch:
    """``make_batch(source, seq, run, n, t0, events)``."""
    return make_batch


LiveFactory = Callable[..., ServerThread]


@pytest.fixture
def live_factory(tmp_path: Path) -> Iterator[LiveFactory]:
    """Collectors in a thread of this process on a free port (``auth=``, ``max_body_bytes=``),
    each on a fresh store, or on the store file ``store=NAME`` that collectors started one after
    another share (as across a restart)."""
    running: list[ServerThread] = []

    def start(store: str | None = None, **options: Any) -> ServerThread:
        path = tmp_path / (store or f"store{len(running)}.duckdb")
        server = ServerThread(path, CollectorOptions(port=0, **options))
        running.append(server.start())
        return server

    yield start
    for server in running:
        server.stop()


@pytest.fixture
def client(live_factory: LiveFactory) -> Iterator[httpx.Client]:
    """An HTTP client of an open in-process collector over a fresh store."""
    with httpx.Client(base_url=live_factory().url, timeout=30) as opened:
        yield opened
