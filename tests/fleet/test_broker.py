"""Through a real RabbitMQ (Debian's, started on loopback): producers publish, collectors read
their partitions; the broker down, the broker restarted and a collector killed lose nothing and
store nothing twice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from _rabbitmq import Broker
from conftest import Collector, CollectorFactory

from stepwatch.server import HOP_HEADER
from stepwatch.wire import partition_of

from ._fleet import (
    PARTITIONS,
    balanced,
    complete,
    eventually,
    finished,
    fleet_args,
    reads,
    run_of,
    stored_steps,
    train,
)


def test_runs_reach_the_collector_through_the_broker(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    collector = collector_factory(extra_args=fleet_args(broker, "solo"))
    eventually(lambda: balanced([collector]), "the collector to read every partition")
    finished(train(broker, tmp_path / "spool", ["via-a", "via-b"], 300, 0.001))
    for run in ("via-a", "via-b"):
        complete(collector, run, 300)
        record = httpx.get(f"{collector.url}/api/v1/runs/{run}", timeout=10).json()
        assert record["project"] == "fleet"
        assert record["status"] == "finished"
    assert not list((tmp_path / "spool").rglob("*.seg")), "the spools were delivered and removed"


def test_producers_spool_while_the_broker_is_down_then_deliver(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    collector = collector_factory(extra_args=fleet_args(broker, "solo"))
    eventually(lambda: balanced([collector]), "the collector to read every partition")
    broker.stop()
    try:
        trainer = train(broker, tmp_path / "spool", ["while-down"], 200, 0.002)
        eventually(lambda: list((tmp_path / "spool").rglob("*.seg")), "the spool to fill")
        time.sleep(2.0)  # the trainer logs on, and its sender retries
        assert trainer.poll() is None
    finally:
        broker.start()
    finished(trainer)
    complete(collector, "while-down", 200)


def test_a_broker_killed_and_restarted_loses_nothing(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    """Batches the broker confirmed while no collector read them survive its kill -9."""
    collector = collector_factory(extra_args=fleet_args(broker, "solo"))
    eventually(lambda: balanced([collector]), "the collector to read every partition")
    collector.stop()
    finished(train(broker, tmp_path / "spool", ["kept-a", "kept-b"], 300, 0.0))
    broker.kill()
    broker.start()
    collector.start()
    for run in ("kept-a", "kept-b"):
        complete(collector, run, 300)


def test_a_killed_collector_s_runs_are_taken_over_whole(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path
) -> None:
    """Its partitions go to the other collector within seconds, which reads them from the start
    of the stream: the run ends there complete, each step once, and its detection goes on there
    (the NaN loss c0 alerted on is c1's alert too, once)."""
    c0 = collector_factory(extra_args=fleet_args(broker, "c0"))
    c1 = collector_factory(extra_args=fleet_args(broker, "c1"))
    eventually(lambda: balanced([c0, c1]), "the two collectors to share the partitions")
    doomed, kept = run_of(["c0", "c1"], "c0", "doomed"), run_of(["c0", "c1"], "c1", "kept")
    steps = 1500
    trainer = train(broker, tmp_path / "spool", [doomed, kept], steps, 0.002, nan_step=50)
    eventually(lambda: len(stored_steps(c0, doomed)) > 100, "c0 to store the run it owns")
    assert not stored_steps(c1, doomed, here=True)
    eventually(lambda: _nan_alerts(c0, doomed), "c0 to alert on the NaN loss")
    c0.kill()
    killed = time.monotonic()
    partition = partition_of(doomed, PARTITIONS)
    eventually(lambda: partition in reads(c1), "c1 to take the partition", timeout_s=15)
    taken_s = time.monotonic() - killed
    assert taken_s < 10, taken_s
    finished(trainer)
    complete(c1, doomed, steps)
    complete(c1, kept, steps)
    assert len(eventually(lambda: _nan_alerts(c1, doomed), "c1's alert")) == 1


def _nan_alerts(collector: Collector, run: str) -> list[dict[str, Any]]:
    """The alerts on ``run``'s non-finite loss ``collector`` holds itself."""
    asked = {"run": run, "state": "all"}
    found = httpx.get(
        f"{collector.url}/api/v1/alerts", params=asked, headers={HOP_HEADER: "1"}, timeout=10
    ).json()
    return [a for a in found if a["kind"] == "nonfinite"]


def test_a_message_with_a_wrong_token_is_refused_and_changes_nothing(
    broker: Broker, collector_factory: CollectorFactory, tmp_path: Path, fleet_key: Path
) -> None:
    collector = collector_factory(auth=True, extra_args=fleet_args(broker, "guarded", fleet_key))
    eventually(lambda: len(reads(collector)) == PARTITIONS, "the collector to read")
    finished(train(broker, tmp_path / "bad", ["forged"], 20, 0.0, "default", "sw_wrong"))
    viewer = collector.tokens["viewer", "other"]
    finished(train(broker, tmp_path / "other", ["elsewhere"], 20, 0.0, "other", viewer))
    ingest = collector.tokens["ingest", "default"]
    finished(train(broker, tmp_path / "good", ["honest"], 20, 0.0, "default", ingest))
    complete(collector, "honest", 20)
    with httpx.Client(base_url=collector.url, headers=collector.headers, timeout=10) as api:
        for refused in ("forged", "elsewhere"):  # read before "honest" in its partition or not:
            assert api.get(f"/api/v1/runs/{refused}").status_code == 404  # each stays unknown
            assert not stored_steps(collector, refused)
        assert _refused(api.get("/metrics").text) >= 2


def _refused(metrics: str) -> float:
    """Messages the collector's /metrics say it refused."""
    for line in metrics.splitlines():
        if line.startswith('stepwatch_broker_messages_total{outcome="refused"}'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no count of refused messages")
