"""The SDK side of the demo: one Run per rank and one per node, all sharing one run id.

This is what a real job looks like to the collector: every rank's process
logs its own timings, rank 0 logs the training curves, and a node agent logs
its GPUs and host, each through its own spool and sender.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .._encryption import EncryptionKey
from ..model import RunStatus
from ..sdk import HEARTBEAT, Run
from ._hardware import HardwareSample
from ._shape import TrainingShape
from ._training import StepMetrics

PROJECT = "demo"
#: How often a producer's liveness sample is sent (the SDK's default).
HEARTBEAT_S = 5.0


class Sink(Protocol):
    """Where the played simulation goes: the SDK fleet live, or a recording in simulated time."""

    def log_step(self, m: StepMetrics) -> int: ...
    def log_hardware(self, sample: HardwareSample) -> int: ...
    def event(self, kind: str, text: str, **data: Any) -> None: ...
    def log_line(self, rank: int, text: str) -> None: ...
    def drop_node(self, node: int) -> None: ...
    def finish(self, status: str) -> None: ...


class Fleet:
    """Every SDK Run of the simulated job; each ``log_*`` returns how many samples it logged.

    The processes of ``mortal`` nodes (those a fault takes down) send their heartbeats through
    the fleet rather than their own timer, so that they fall silent with the node.
    """

    def __init__(
        self,
        shape: TrainingShape,
        run_id: str,
        server: str,
        spool_dir: Path,
        flush_interval_s: float,
        mortal: frozenset[int] = frozenset(),
        wall: Callable[[], float] = time.time,
        key: EncryptionKey | None = None,
    ) -> None:
        self.shape, self._wall = shape, wall
        self.dropped: set[int] = set()
        # Every process registers the same metadata, so whichever registers last agrees.
        common: dict[str, Any] = {
            "project": PROJECT,
            "name": f"{shape.model_params / 1e9:.1f}B on {shape.nodes}x{shape.gpus_per_node} GPUs",
            "config": shape.config(),
            "planned_total_steps": shape.planned_total_steps,
            "server": server,
            "dir": spool_dir,
            "run_id": run_id,
            "flush_interval_s": flush_interval_s,
            "encryption_key": key,
        }
        self.ranks: list[Run] = []
        self.nodes: list[Run] = []
        try:
            for r in range(shape.ranks):
                n = r // shape.gpus_per_node
                node = shape.node_name(n)
                self.ranks.append(_run(common, {"rank": r, "node": node}, node, n in mortal))
            for n in range(shape.nodes):
                node = shape.node_name(n)
                self.nodes.append(_run(common, {"node": node}, node, n in mortal))
        except BaseException:
            self.finish(RunStatus.FAILED)
            raise
        self._gpu_labels = [{"gpu": g} for g in range(shape.gpus_per_node)]
        self._mortal = sorted(mortal)
        self._started, self._beat_due = wall(), wall()

    def _live(self, rank: int) -> bool:
        return rank // self.shape.gpus_per_node not in self.dropped

    def log_step(self, m: StepMetrics) -> int:
        """Each rank logs its timings; rank 0 the training curves; node leaders their checkpoint."""
        columns = {name: values.tolist() for name, values in m.timings.items()}
        live = [r for r in range(len(self.ranks)) if self._live(r)]
        for r in live:
            self.ranks[r].log({name: column[r] for name, column in columns.items()}, step=m.step)
        self.ranks[0].log(m.train, step=m.step)
        logged = len(live) * len(columns) + len(m.train)
        if m.ckpt_bytes:
            for n, write_s in enumerate(m.ckpt_write_s.tolist()):
                if n not in self.dropped:
                    leader = self.ranks[n * self.shape.gpus_per_node]
                    leader.log({"ckpt.write_s": write_s, "ckpt.bytes": m.ckpt_bytes}, step=m.step)
                    logged += 2
        return logged

    def log_hardware(self, sample: HardwareSample) -> int:
        """Each node's agent logs its GPUs (labelled by index) and its host."""
        gpu = {name: values.tolist() for name, values in sample.gpu.items()}
        host = {name: values.tolist() for name, values in sample.host.items()}
        live = [n for n in range(len(self.nodes)) if n not in self.dropped]
        for n in live:
            run = self.nodes[n]
            for g, labels in enumerate(self._gpu_labels):
                run.log({name: rows[n][g] for name, rows in gpu.items()}, labels=labels)
            run.log({name: column[n] for name, column in host.items()})
        self._beat()
        return len(live) * (self.shape.gpus_per_node * len(gpu) + len(host))

    def _beat(self) -> None:
        """The heartbeats of the mortal nodes' processes that are still alive, when due."""
        now = self._wall()
        if not self._mortal or now < self._beat_due:
            return
        self._beat_due = now + HEARTBEAT_S
        for n in self._mortal:
            if n not in self.dropped:
                first = n * self.shape.gpus_per_node
                for run in [*self.ranks[first : first + self.shape.gpus_per_node], self.nodes[n]]:
                    run.log({HEARTBEAT: now - self._started})

    def event(self, kind: str, text: str, **data: Any) -> None:
        """An event of the whole job, recorded by rank 0."""
        self.ranks[0].event(kind, text, **data)

    def log_line(self, rank: int, text: str) -> None:
        """A line of one rank's log (as the node agent's log tailer would ship it)."""
        if self._live(rank):
            self.ranks[rank].event("log", text, level="error")

    def drop_node(self, node: int) -> None:
        """The node is lost: its processes log nothing more (their runs end with the others)."""
        self.dropped.add(node)

    def finish(self, status: str) -> None:
        """Finish every run, rank 0 last, so the run's end is recorded after all its data."""
        for run in [*self.ranks[1:], *self.nodes, *self.ranks[:1]]:
            run.finish(status)


def _run(common: dict[str, Any], labels: dict[str, object], node: str, mortal: bool) -> Run:
    """One SDK run, blind to this machine's environment and host name."""
    beat = None if mortal else HEARTBEAT_S
    return Run(**common, labels=labels, heartbeat_s=beat, environ={}, hostname=node)
