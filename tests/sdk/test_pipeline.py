"""The shared producer pipeline: heartbeats for liveness, and shipping outside any run."""

from __future__ import annotations

import time
from pathlib import Path

from stepwatch.model import NO_STEP, SeriesKey
from stepwatch.sdk import HEARTBEAT, Pipeline
from stepwatch.spool import FakeCollector


def _wait_for(predicate, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_an_idle_pipeline_still_beats(tmp_path: Path, spooled) -> None:  # type: ignore[no-untyped-def]
    pipe = Pipeline(
        tmp_path / "p",
        "src-1",
        {"node": "n0"},
        server=None,
        flush_interval_s=0.02,
        heartbeat_s=0.05,
    )
    time.sleep(0.4)
    pipe.close(1.0)
    samples, _ = spooled(tmp_path / "p")
    beats = [(labels, step, value) for name, labels, step, value in samples if name == HEARTBEAT]
    assert len(beats) >= 3
    assert all(labels == {"node": "n0"} and step == NO_STEP for labels, step, _ in beats)
    uptimes = [value for _, _, value in beats]
    assert uptimes == sorted(uptimes) and uptimes[0] >= 0 and uptimes[-1] > 0.1


def test_no_heartbeat_when_disabled(tmp_path: Path, spooled) -> None:  # type: ignore[no-untyped-def]
    pipe = Pipeline(
        tmp_path / "p",
        "src-1",
        {"node": "n0"},
        server=None,
        flush_interval_s=0.02,
        heartbeat_s=None,
    )
    sid = pipe.intern(SeriesKey.of("host.cpu_pct", {"node": "n0"}))
    pipe.append([sid], [12.5], 100.0, NO_STEP)
    pipe.close(1.0)
    samples, _ = spooled(tmp_path / "p")
    assert samples == [("host.cpu_pct", {"node": "n0"}, NO_STEP, 12.5)]


def test_a_producer_outside_any_run_ships_without_creating_one(tmp_path: Path) -> None:
    with FakeCollector() as collector:
        pipe = Pipeline(tmp_path / "p", "agent-1", {"node": "n0"}, server=collector.url)
        sid = pipe.intern(SeriesKey.of("host.mem_used_bytes", {"node": "n0"}))
        pipe.append([sid], [1e9], 100.0, NO_STEP)
        pipe.add_event({"ts": 100.0, "kind": "log", "text": "hello", "labels": {}, "data": {}})
        assert pipe.close(10.0)
        assert collector.samples("host.mem_used_bytes") == [({"node": "n0"}, NO_STEP, 1e9)]
        assert [e.text for b in collector.batches for e in b.events] == ["hello"]
        assert collector.runs == {} and "/api/v1/runs" not in collector.paths
