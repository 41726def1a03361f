"""A restart of the collector, killed (-9) mid-stream or stopped, is invisible from outside: the
alert firing before it fires after it under the same id, nothing is resolved in between, the
webhook hears of it once, a policy step pending across it is taken once, and a spike right
after it is caught (the detectors kept their baselines)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from act._notify_parts import Recorder, recording_server
from conftest import Collector, CollectorFactory, poll

T0 = 1_780_000_000.0
RULES = """\
groups:
  - name: restart
    rules:
      - alert: hot
        kind: gpu_hot
        signal: {metric: gpu.temp_c, by: [run, node]}
        threshold: "> 80"
        for: 5 samples
      - alert: spike
        kind: spike
        signal: {metric: train.loss, by: [run]}
        detector: {type: robust_z, warmup: 40}
policies:
  rules:
    - name: cool_down
      kinds: [gpu_hot]
      steps:
        - {after: 12s, action: checkpoint}
"""


class Trainer:
    """Streams one second of data time per batch, as a trainer and its node's agent would:
    loss (noisy, falling), and a GPU that heats past 80 °C from step 20; a batch the collector
    did not acknowledge is sent again (same seq) until it is."""

    def __init__(self, url: str) -> None:
        self.url, self.step, self.spike = url, 0, False
        self.acked = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainer")

    def _doc(self, i: int) -> dict[str, Any]:
        loss = 2.0 * math.exp(-i / 3000) + 0.01 * math.sin(i * 1.7)
        loss *= 4.0 if self.spike else 1.0
        temp = 85.0 if i >= 20 else 60.0
        node = {"run": "r", "node": "n0"}
        samples = [
            {"name": "loss", "labels": {"run": "r"}, "step": i, "ts": T0 + i, "value": loss},
            {"name": "gpu.temp_c", "labels": node, "ts": T0 + i, "value": temp},
        ]
        return {"source": "trainer-r", "seq": i + 1, "samples": samples}

    def _run(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self._stop.wait(0.05):
                try:
                    sent = client.post(f"{self.url}/api/v1/ingest", json=self._doc(self.step))
                except httpx.TransportError:
                    continue  # the collector is down: the same batch again
                if sent.is_success:
                    self.step += 1
                    self.acked = self.step

    def __enter__(self) -> Trainer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def hook() -> Iterator[Recorder]:
    with recording_server() as server:
        yield server


@pytest.fixture
def collector(collector_factory: CollectorFactory, hook: Recorder, tmp_path: Path) -> Collector:
    rules, notify = tmp_path / "rules.yaml", tmp_path / "notify.yaml"
    rules.write_text(RULES)
    notify.write_text(
        f"receivers:\n  - {{name: hook, type: webhook, url: '{hook.url}/alerts'}}\n"
        "route:\n  receiver: hook\n  group_wait: 0s\n"
        "  group_by: [kind, run]\n"  # the spike's own message: the hot alert's are counted
    )
    args = ("--rules", str(rules), "--notify", str(notify), "--checkpoint-interval", "0.5")
    return collector_factory(extra_args=args)


def _records(collector: Collector, kind: str) -> list[dict[str, Any]]:
    params = {"kind": kind, "limit": 10_000}
    return list(httpx.get(f"{collector.url}/api/v1/events", params=params, timeout=10).json())


def _firing(collector: Collector, kind: str) -> list[str]:
    found = _records(collector, "alert")
    latest = {e["data"]["id"]: e for e in found if e["data"].get("kind") == kind}
    return [i for i, e in latest.items() if e["data"]["state"] == "firing"]


def _told(hook: Recorder, alert_id: str) -> int:
    """Webhook calls that name this alert."""
    return sum(1 for r in hook.requests if alert_id in r.body.decode())


@pytest.mark.parametrize("how", ["kill -9", "stop"])
def test_a_restart_is_invisible_from_outside(
    collector: Collector, hook: Recorder, how: str
) -> None:
    restart: Callable[[], None] = collector.kill if how == "kill -9" else collector.stop
    with Trainer(collector.url) as trainer:
        (hot,) = poll(lambda: _firing(collector, "gpu_hot"))
        assert poll(lambda: _told(hook, hot) == 1)
        assert poll(lambda: trainer.acked >= 60)  # the spike's baseline is warm, checkpointed
        restart()  # mid-stream, the policy's step not yet due
        collector.start()  # ready only once detection is restored and caught up
        assert poll(lambda: trainer.acked >= trainer.step > 70)
        trainer.spike = True  # right after the restart: a cold detector would still warm up
        spikes = poll(lambda: _firing(collector, "spike"))
        commands = poll(lambda: [c for c in _records(collector, "command")], timeout_s=30)
    assert _firing(collector, "gpu_hot") == [hot]
    transitions = [e["data"] for e in _records(collector, "alert") if e["data"]["id"] == hot]
    assert [t["state"] for t in transitions] == ["firing"]  # nothing resolved it, in between
    assert _told(hook, hot) == 1
    assert len(spikes) == 1
    assert [(c["data"]["action"], c["data"]["alert_id"]) for c in commands] == [("checkpoint", hot)]
    audit = [e for e in _records(collector, "audit") if '"checkpoint"' in json.dumps(e)]
    assert len([a for a in audit if a["data"].get("result") == "issued"]) == 1
