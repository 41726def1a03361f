"""Readers on other threads see whole batches only, while the writer appends and compacts."""

from __future__ import annotations

import threading

import numpy as np

from stepwatch.model import SeriesKey
from stepwatch.store import Store

from .conftest import T0, batch

KEY = SeriesKey.of("loss", {"run": "r1"})
ROWS = 5_000
BATCHES = 30


def test_readers_see_consistent_snapshots_while_writing(store: Store) -> None:
    failures: list[BaseException] = []

    def write() -> None:
        try:
            for seq in range(BATCHES):
                ts = T0 + seq * ROWS + np.arange(ROWS, dtype=np.float64)
                store.apply([batch([KEY], np.zeros(ROWS, int), ts, np.ones(ROWS), seq=seq)])
                if seq % 4 == 3:
                    store.compact()
        except BaseException as e:  # handed to the test thread
            failures.append(e)

    writer = threading.Thread(target=write, name="store-writer")
    writer.start()
    seen: list[int] = []
    while writer.is_alive() or not seen:
        got = store.downsample(0, T0, T0 + BATCHES * ROWS, 40)
        (pct,) = store.percentiles("train.loss", None, T0, T0 + BATCHES * ROWS, 40)
        seen.append(int(got["count"].sum()))
        assert seen[-1] % ROWS == 0 and int(pct["count"].sum()) % ROWS == 0
    writer.join()
    assert not failures
    assert seen == sorted(seen)
    assert store.downsample(0, T0, T0 + BATCHES * ROWS, 40)["count"].sum() == BATCHES * ROWS
