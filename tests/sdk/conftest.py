"""Helpers of the SDK tests: read back what a run wrote to its spool."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stepwatch.model import Event
from stepwatch.sdk import Run
from stepwatch.spool import Spool
from stepwatch.wire import decode

Sample = tuple[str, dict[str, str], int, float]


Spooled = Callable[[Path], tuple[list[Sample], list[Event]]]


def read_spool(spool_dir: Path) -> tuple[list[Sample], list[Event]]:
    """Every sample (name, labels, step, value) and event in a spool directory, in order."""
    samples: list[Sample] = []
    events: list[Event] = []
    with Spool(spool_dir) as spool:
        for _, payload in spool.records():
            batch = decode(payload)
            events += batch.events
            for i in range(len(batch)):
                key = batch.keys[int(batch.series[i])]
                samples.append(
                    (key.name, dict(key.labels), int(batch.step[i]), float(batch.value[i]))
                )
    return samples, events


@pytest.fixture
def spooled() -> Spooled:
    """``spooled(spool_dir)``: the samples and events a run wrote, read back from disk."""
    return read_spool


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[Callable[..., Run]]:
    """An offline Run spooling under tmp_path, with a fixed host name, no launcher env and
    no heartbeat (so spooled samples are exactly the logged ones)."""
    runs: list[Run] = []

    def make(**kwargs: object) -> Run:
        kwargs.setdefault("dir", tmp_path / "spool")
        kwargs.setdefault("environ", {})
        kwargs.setdefault("hostname", "host0")
        kwargs.setdefault("heartbeat_s", None)
        run = Run(**kwargs)  # type: ignore[arg-type]
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.finish()
