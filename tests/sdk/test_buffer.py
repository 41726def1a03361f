"""The buffer: calls kept as given, columns built at the swap, nothing lost to a racing swap."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from stepwatch.sdk import Run
from stepwatch.sdk._buffer import Buffer


def test_a_swap_builds_the_columns_in_call_order() -> None:
    buffer = Buffer()
    assert buffer.append([3, 1], [0.5, float("nan")], 10.0, 7) == 2
    assert buffer.append([2], [1.5], 11.0, -1) == 3
    buffer.add_event({"kind": "checkpoint"})
    cols = buffer.swap()
    assert cols.value.dtype == np.float64 and cols.series.dtype == np.uint32
    assert cols.ts.dtype == np.float64 and cols.step.dtype == np.int64
    assert cols.value[0] == 0.5 and np.isnan(cols.value[1]) and cols.value[2] == 1.5
    assert list(cols.series) == [3, 1, 2]
    assert list(cols.ts) == [10.0, 10.0, 11.0] and list(cols.step) == [7, 7, -1]
    assert cols.events == [{"kind": "checkpoint"}]


def test_a_swap_empties_the_buffer_and_its_count() -> None:
    buffer = Buffer()
    buffer.append([0, 1, 2], [1.0, 2.0, 3.0], 1.0, 0)
    buffer.swap()
    empty = buffer.swap()
    assert not len(empty.value) and not len(empty.ts) and not empty.events
    assert empty.series.dtype == np.uint32 and empty.step.dtype == np.int64
    assert buffer.append([0], [1.0], 2.0, 1) == 1


def test_appends_racing_swaps_are_all_taken_once_in_order() -> None:
    buffer, calls = Buffer(), 20_000
    done, swapped = threading.Event(), threading.Semaphore(0)

    def produce() -> None:
        for i in range(calls):
            buffer.append([i % 5, 5], [float(i), -float(i)], float(i), i)
            if i % 4_000 == 3_999:  # however loaded the machine, some swaps come in between
                swapped.acquire(timeout=10)
        done.set()

    swaps = []
    producer = threading.Thread(target=produce)
    producer.start()
    while not done.is_set():
        swaps.append(buffer.swap())
        swapped.release()
    producer.join()
    swaps.append(buffer.swap())
    step = np.concatenate([cols.step for cols in swaps])
    value = np.concatenate([cols.value for cols in swaps])
    assert len(swaps) > 2  # the swaps did interleave with the appends
    assert np.array_equal(step, np.repeat(np.arange(calls), 2))
    assert np.array_equal(value[::2], np.arange(calls)) and np.array_equal(value[1::2], -step[1::2])


def test_a_step_beyond_the_stored_range_is_refused_before_anything_is_buffered(
    tmp_path: Path,
) -> None:
    with Run(dir=tmp_path, heartbeat_s=None) as run:
        with pytest.raises(ValueError, match="step must be from 0 to"):
            run.log({"loss": 1.0}, step=2**63)
        run.log({"loss": 2.0}, step=2**63 - 1)
        run.flush()
        assert run.durable_samples == 1
