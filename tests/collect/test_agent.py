"""The agent loop: labels every reading, keeps each source's rate, survives failing sources."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from stepwatch.collect import SOURCE_ERRORS, Agent, Reading, Sample
from stepwatch.model import Event
from stepwatch.sdk import Pipeline
from stepwatch.spool import Spool
from stepwatch.wire import decode


@dataclass
class CountingSource:
    """Yields its read count as ``fake.reads``; raises while ``failing``."""

    name: str
    interval_s: float = 0.05
    failing: bool = False
    reads: int = 0
    closed: bool = False
    times: list[float] = field(default_factory=list)

    def read(self, now: float) -> Reading:
        self.times.append(now)
        if self.failing:
            raise OSError("device went away")
        self.reads += 1
        sample = Sample("fake.reads", float(self.reads), {"gpu": "3"})
        return Reading([sample], [Event(now, "log", f"read {self.reads}", {"path": "/x"})])

    def close(self) -> None:
        self.closed = True


def _agent(tmp_path: Path, *sources: CountingSource) -> Agent:
    pipe = Pipeline(tmp_path / "spool", "agent-t", {"node": "n0"}, server=None, heartbeat_s=None)
    return Agent(sources, pipe, {"node": "n0", "run": "r1"})


def _spooled(tmp_path: Path) -> tuple[list[tuple[str, dict[str, str], float]], list[Event]]:
    samples, events = [], []
    with Spool(tmp_path / "spool") as spool:
        for _, payload in spool.records():
            batch = decode(payload)
            events += batch.events
            for i in range(len(batch)):
                key = batch.keys[int(batch.series[i])]
                samples.append((key.name, dict(key.labels), float(batch.value[i])))
    return samples, events


def test_readings_carry_the_agent_labels_under_the_source_labels(tmp_path: Path) -> None:
    source = CountingSource("fake")
    agent = _agent(tmp_path, source)
    agent.read(source)
    agent.read(source)
    agent.stop()
    samples, events = _spooled(tmp_path)
    labels = {"node": "n0", "run": "r1", "gpu": "3"}
    assert samples == [("fake.reads", labels, 1.0), ("fake.reads", labels, 2.0)]
    assert [e.text for e in events] == ["read 1", "read 2"]
    assert events[0].labels == {"node": "n0", "run": "r1", "path": "/x"}
    assert source.closed


def test_a_failing_source_is_counted_and_reported_once_per_streak(tmp_path: Path) -> None:
    source = CountingSource("gpu", failing=True)
    agent = _agent(tmp_path, source)
    for _ in range(3):
        agent.read(source)
    source.failing = False
    agent.read(source)
    source.failing = True
    agent.read(source)
    agent.stop()
    samples, events = _spooled(tmp_path)
    errors = [v for name, labels, v in samples if name == SOURCE_ERRORS]
    assert errors == [1.0, 2.0, 3.0, 4.0]
    assert all(labels["source"] == "gpu" for name, labels, _ in samples if name == SOURCE_ERRORS)
    reported = [e for e in events if e.kind == "collector_error"]
    assert len(reported) == 2
    assert "gpu" in reported[0].text and "device went away" in reported[0].text


def test_each_source_is_read_at_its_own_rate_until_stopped(tmp_path: Path) -> None:
    fast, slow = CountingSource("fast", 0.02), CountingSource("slow", 0.25)
    agent = _agent(tmp_path, fast, slow).start()
    time.sleep(0.6)
    assert agent.stop() is False  # offline: nothing to deliver to
    assert slow.reads in (2, 3, 4)
    assert fast.reads > 3 * slow.reads
    assert fast.closed and slow.closed
