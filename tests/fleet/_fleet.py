"""What the fleet's tests share: a trainer publishing through the broker, collectors' options in
a fleet, and what they answer."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
from _rabbitmq import Broker
from conftest import Collector

from stepwatch.fleet import owner
from stepwatch.server import HOP_HEADER
from stepwatch.wire import partition_of

PARTITIONS = 4
WAIT_S = 60.0

TRAINER = textwrap.dedent(
    """
    import os, sys, time
    import stepwatch
    broker, spool, steps, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    nan_step = int(os.environ.get("NAN_STEP", "-1"))
    runs = [stepwatch.init(project=sys.argv[5], run_id=r, transport=broker, dir=spool,
                           labels={"rank": 0, "node": "n0"}, flush_interval_s=0.05)
            for r in sys.argv[6:]]
    for i in range(steps):
        for run in runs:
            run.log({"loss": float("nan") if i == nan_step else 1.0 / (i + 1)}, step=i)
        time.sleep(pause)
    for run in runs:
        run.finish(timeout_s=120)
    print("finished", flush=True)
    """
)


def fleet_args(broker: Broker, name: str, key: Path | None = None) -> tuple[str, ...]:
    """A collector's options in a fleet of ``PARTITIONS`` partitions, as ``name``."""
    keyed = ("--fleet-key-file", str(key)) if key else ()
    return ("--broker", broker.url, "--broker-partitions", str(PARTITIONS),
            "--collector-id", name, *keyed)  # fmt: skip


def train(
    broker: Broker,
    spool: Path,
    runs: list[str],
    steps: int,
    pause: float,
    project: str = "fleet",
    token: str | None = None,
    nan_step: int = -1,
) -> Any:
    """A trainer logging ``steps`` losses to each of ``runs`` through the broker (NaN at
    ``nan_step``), then finishing them."""
    args = [sys.executable, "-c", TRAINER, broker.url, str(spool), str(steps), str(pause),
            project, *runs]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    env["NAN_STEP"] = str(nan_step)
    if token is not None:
        env["STEPWATCH_TOKEN"] = token
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


def finished(trainer: Any) -> None:
    out, _ = trainer.communicate(timeout=180)
    assert "finished" in out, out


def complete(collector: Collector, run: str, steps: int) -> None:
    """``collector`` ends with every step of ``run`` once, in order."""
    got = eventually(
        lambda: (s := stored_steps(collector, run)) and len(s) >= steps and s, f"{run}'s steps"
    )
    assert got == list(range(steps))


def stored_steps(collector: Collector, run: str, *, here: bool = False) -> list[int]:
    """The steps of ``run``'s loss ``collector`` answers with, in order (``here``: from its own
    store, not the run's owner's)."""
    headers = {**collector.headers, **({HOP_HEADER: "1"} if here else {})}
    with httpx.Client(base_url=collector.url, headers=headers, timeout=10) as client:
        series = client.get("/api/v1/series", params={"name": "train.loss", "run": run}).json()
        if not series:
            return []
        (found,) = series
        raw = client.get("/api/v1/query/raw", params={"series": found["id"], "run": run})
        return list(raw.json()["step"])


def eventually(check: Any, what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (answer := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return answer


def fleet_of(collector: Collector) -> dict[str, Any]:
    fleet = httpx.get(f"{collector.url}/api/v1/fleet", headers=collector.headers, timeout=10)
    return dict(fleet.json())


def balanced(collectors: list[Collector]) -> bool:
    """Every partition read by exactly one collector, each heard by every one."""
    read: list[int] = []
    for collector in collectors:
        fleet = fleet_of(collector)
        if len(fleet["members"]) != len(collectors):
            return False
        read += reads(collector)
    return sorted(read) == list(range(PARTITIONS))


def run_of(names: list[str], member: str, prefix: str) -> str:
    """A run id whose partition ``member`` owns among ``names``."""
    for i in range(1000):
        run = f"{prefix}-{i}"
        if owner(partition_of(run, PARTITIONS), names) == member:
            return run
    raise AssertionError("no run id found")


def reads(collector: Collector) -> list[int]:
    """The partitions ``collector`` reads now (none before its intake started)."""
    fleet = fleet_of(collector)
    return next((m["partitions"] for m in fleet["members"] if m["id"] == fleet["self"]), [])
