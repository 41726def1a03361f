"""Through a real RabbitMQ (Debian's, started on loopback): producers publish, collectors read
their partitions; the broker down, the broker restarted and a collector killed lose nothing and
store nothing twice."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _rabbitmq import Broker
from conftest import Collector, CollectorFactory

from stepwatch.fleet import owner
from stepwatch.wire import partition_of

PARTITIONS = 4
WAIT_S = 60.0

TRAINER = textwrap.dedent(
    """
    import sys, time
    import stepwatch
    broker, spool, steps, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    runs = [stepwatch.init(project=sys.argv[5], run_id=r, transport=broker, dir=spool,
                           labels={"rank": 0, "node": "n0"}, flush_interval_s=0.05)
            for r in sys.argv[6:]]
    for i in range(steps):
        for run in runs:
            run.log({"loss": 1.0 / (i + 1)}, step=i)
        time.sleep(pause)
    for run in runs:
        run.finish(timeout_s=120)
    print("finished", flush=True)
    """
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = Broker(tmp_path_factory.mktemp("rabbitmq")).start()
    try:
        yield started
    finally:
        started.close()


def _fleet_args(broker: Broker, name: str) -> tuple[str, ...]:
    return ("--broker", broker.url, "--broker-partitions", str(PARTITIONS),
            "--collector-id", name)  # fmt: skip


def _train(
    broker: Broker,
    spool: Path,
    runs: list[str],
    steps: int,
    pause: float,
    project: str = "fleet",
    token: str | None = None,
) -> Any:
    """A trainer logging ``steps`` losses to each of ``runs`` through the broker, then
    finishing them."""
    args = [sys.executable, "-c", TRAINER, broker.url, str(spool), str(steps), str(pause),
            project, *runs]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    if token is not None:
        env["STEPWATCH_TOKEN"] = token
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


def _finished(trainer: Any) -> None:
    out, _ = trainer.communicate(timeout=180)
    assert "finished" in out, out


def _complete(collector: Collector, run: str, steps: int) -> None:
    """``collector`` ends with every step of ``run`` once, in order."""
    got = _eventually(
        lambda: (s := _steps(collector, run)) and len(s) >= steps and s, f"{run}'s steps"
    )
    assert got == list(range(steps))


def _steps(collector: Collector, run: str) -> list[int]:
    """The steps of ``run``'s loss ``collector`` stored, in order."""
    with httpx.Client(base_url=collector.url, headers=collector.headers, timeout=10) as client:
        series = client.get("/api/v1/series", params={"name": "train.loss", "run": run}).json()
        if not series:
            return []
        (found,) = series
        return list(client.get("/api/v1/query/raw", params={"series": found["id"]}).json()["step"])


def _eventually(check: Any, what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (answer := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return answer


def _fleet(collector: Collector) -> dict[str, Any]:
    fleet = httpx.get(f"{collector.url}/api/v1/fleet", headers=collector.headers, timeout=10)
    return dict(fleet.json())


def _balanced(collectors: list[Collector]) -> bool:
    """Every partition read by exactly one collector, each heard by every one."""
    read: list[int] = []
    for collector in collectors:
        fleet = _fleet(collector)
        if len(fleet["members"]) != len(collectors):
            return False
        read += _reads(collector)
    return sorted(read) == list(range(PARTITIONS))


def _run_of(names: list[str], member: str, prefix: str) -> str:
    """A run id whose partition ``member`` owns among ``names``."""
    for i in range(1000):
        run = f"{prefix}-{i}"
        if owner(partition_of(run, PARTITIONS), names) == member:
            return run
    raise AssertionError("no run id found")


def test_runs_reach_the_collector_through_the_broker(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    collector = collector_factory(extra_args=_fleet_args(broker, "solo"))
    _eventually(lambda: _balanced([collector]), "the collector to read every partition")
    _finished(_train(broker, tmp_path / "spool", ["via-a", "via-b"], 300, 0.001))
    for run in ("via-a", "via-b"):
        _complete(collector, run, 300)
        record = httpx.get(f"{collector.url}/api/v1/runs/{run}", timeout=10).json()
        assert record["project"] == "fleet"
        assert record["status"] == "finished"
    assert not list((tmp_path / "spool").rglob("*.seg")), "the spools were delivered and removed"


def test_producers_spool_while_the_broker_is_down_then_deliver(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    collector = collector_factory(extra_args=_fleet_args(broker, "solo"))
    _eventually(lambda: _balanced([collector]), "the collector to read every partition")
    broker.stop()
    try:
        trainer = _train(broker, tmp_path / "spool", ["while-down"], 200, 0.002)
        _eventually(lambda: list((tmp_path / "spool").rglob("*.seg")), "the spool to fill")
        time.sleep(2.0)  # the trainer logs on, and its sender retries
        assert trainer.poll() is None
    finally:
        broker.start()
    _finished(trainer)
    _complete(collector, "while-down", 200)


def test_a_broker_killed_and_restarted_loses_nothing(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    """Batches the broker confirmed while no collector read them survive its kill -9."""
    collector = collector_factory(extra_args=_fleet_args(broker, "solo"))
    _eventually(lambda: _balanced([collector]), "the collector to read every partition")
    collector.stop()
    _finished(_train(broker, tmp_path / "spool", ["kept-a", "kept-b"], 300, 0.0))
    broker.kill()
    broker.start()
    collector.start()
    for run in ("kept-a", "kept-b"):
        _complete(collector, run, 300)


def test_a_killed_collector_s_runs_are_taken_over_whole(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    """Its partitions go to the other collector within seconds, which reads them from the start
    of the stream: the run ends there complete, each step once."""
    c0 = collector_factory(extra_args=_fleet_args(broker, "c0"))
    c1 = collector_factory(extra_args=_fleet_args(broker, "c1"))
    _eventually(lambda: _balanced([c0, c1]), "the two collectors to share the partitions")
    doomed, kept = _run_of(["c0", "c1"], "c0", "doomed"), _run_of(["c0", "c1"], "c1", "kept")
    steps = 1500
    trainer = _train(broker, tmp_path / "spool", [doomed, kept], steps, 0.002)
    _eventually(lambda: len(_steps(c0, doomed)) > 100, "c0 to store the run it owns")
    assert not _steps(c1, doomed)
    c0.kill()
    killed = time.monotonic()
    partition = partition_of(doomed, PARTITIONS)
    _eventually(lambda: partition in _reads(c1), "c1 to take the partition", timeout_s=15)
    taken_s = time.monotonic() - killed
    assert taken_s < 10, taken_s
    _finished(trainer)
    _complete(c1, doomed, steps)
    _complete(c1, kept, steps)


def _reads(collector: Collector) -> list[int]:
    """The partitions ``collector`` reads now (none before its intake started)."""
    fleet = _fleet(collector)
    return next((m["partitions"] for m in fleet["members"] if m["id"] == fleet["self"]), [])


def test_a_message_with_a_wrong_token_is_refused_and_changes_nothing(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    collector = collector_factory(auth=True, extra_args=_fleet_args(broker, "guarded"))
    _eventually(lambda: len(_reads(collector)) == PARTITIONS, "the collector to read")
    _finished(_train(broker, tmp_path / "bad", ["forged"], 20, 0.0, "default", "sw_wrong"))
    viewer = collector.tokens["viewer", "other"]
    _finished(_train(broker, tmp_path / "other", ["elsewhere"], 20, 0.0, "other", viewer))
    ingest = collector.tokens["ingest", "default"]
    _finished(_train(broker, tmp_path / "good", ["honest"], 20, 0.0, "default", ingest))
    _complete(collector, "honest", 20)
    with httpx.Client(base_url=collector.url, headers=collector.headers, timeout=10) as api:
        for refused in ("forged", "elsewhere"):  # read before "honest" in its partition or not:
            assert api.get(f"/api/v1/runs/{refused}").status_code == 404  # each stays unknown
            assert not _steps(collector, refused)
        assert _refused(api.get("/metrics").text) >= 2


def _refused(metrics: str) -> float:
    """Messages the collector's /metrics say it refused."""
    for line in metrics.splitlines():
        if line.startswith('stepwatch_broker_messages_total{outcome="refused"}'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no count of refused messages")
