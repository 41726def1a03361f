"""Fixtures of the store tests: a store on a fake clock, and batches built from plain columns."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from stepwatch.model import NO_STEP, Event, SampleBatch, SeriesKey
from stepwatch.store import Store

T0 = 1_780_000_000.0


@dataclass
class FakeClock:
    """A clock the test moves by hand."""

    now: float = T0

    def __call__(self) -> float:
        return self.now


def batch(
    keys: Sequence[SeriesKey],
    series: Sequence[int] | np.ndarray,
    ts: Sequence[float] | np.ndarray,
    value: Sequence[float] | np.ndarray,
    *,
    step: Sequence[int] | np.ndarray | None = None,
    source: str = "src",
    seq: int = 1,
    events: Sequence[Event] = (),
) -> SampleBatch:
    """A SampleBatch from plain columns; steps default to NO_STEP."""
    n = len(series)
    return SampleBatch(
        source,
        seq,
        list(keys),
        np.asarray(series, np.uint32),
        np.asarray(ts, np.float64),
        np.full(n, NO_STEP, np.int64) if step is None else np.asarray(step, np.int64),
        np.asarray(value, np.float64),
        list(events),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


@pytest.fixture
def store(store_path: Path, clock: FakeClock) -> Iterator[Store]:
    """A fresh store in a temporary file, closed after the test."""
    with Store(store_path, clock=clock) as opened:
        yield opened
