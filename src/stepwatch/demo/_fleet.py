"""The SDK side of the demo: one Run per rank and one per node, all sharing one run id.

This is what a real job looks like to the collector: every rank's process
logs its own timings, rank 0 logs the training curves, and a node agent logs
its GPUs and host, each through its own spool and sender.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model import RunStatus
from ..sdk import Run
from ._hardware import HardwareSample
from ._shape import TrainingShape
from ._training import StepMetrics

PROJECT = "demo"


class Fleet:
    """Every SDK Run of the simulated job; each ``log_*`` returns how many samples it logged."""

    def __init__(
        self,
        shape: TrainingShape,
        run_id: str,
        server: str,
        spool_dir: Path,
        flush_interval_s: float,
    ) -> None:
        self.shape = shape
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
        }
        self.ranks: list[Run] = []
        self.nodes: list[Run] = []
        try:
            for r in range(shape.ranks):
                node = shape.node_name(r // shape.gpus_per_node)
                self.ranks.append(_run(common, {"rank": r, "node": node}, node))
            for n in range(shape.nodes):
                node = shape.node_name(n)
                self.nodes.append(_run(common, {"node": node}, node))
        except BaseException:
            self.finish(RunStatus.FAILED)
            raise
        self._gpu_labels = [{"gpu": g} for g in range(shape.gpus_per_node)]

    def log_step(self, m: StepMetrics) -> int:
        """Each rank logs its timings; rank 0 the training curves; node leaders their checkpoint."""
        columns = {name: values.tolist() for name, values in m.timings.items()}
        for r, run in enumerate(self.ranks):
            run.log({name: column[r] for name, column in columns.items()}, step=m.step)
        self.ranks[0].log(m.train, step=m.step)
        logged = len(self.ranks) * len(columns) + len(m.train)
        if m.ckpt_bytes:
            for n, write_s in enumerate(m.ckpt_write_s.tolist()):
                leader = self.ranks[n * self.shape.gpus_per_node]
                leader.log({"ckpt.write_s": write_s, "ckpt.bytes": m.ckpt_bytes}, step=m.step)
            logged += 2 * self.shape.nodes
        return logged

    def log_hardware(self, sample: HardwareSample) -> int:
        """Each node's agent logs its GPUs (labelled by index) and its host."""
        gpu = {name: values.tolist() for name, values in sample.gpu.items()}
        host = {name: values.tolist() for name, values in sample.host.items()}
        for n, run in enumerate(self.nodes):
            for g, labels in enumerate(self._gpu_labels):
                run.log({name: rows[n][g] for name, rows in gpu.items()}, labels=labels)
            run.log({name: column[n] for name, column in host.items()})
        return self.shape.nodes * (self.shape.gpus_per_node * len(gpu) + len(host))

    def event(self, kind: str, text: str, **data: Any) -> None:
        """An event of the whole job, recorded by rank 0."""
        self.ranks[0].event(kind, text, **data)

    def finish(self, status: str) -> None:
        """Finish every run, rank 0 last, so the run's end is recorded after all its data."""
        for run in [*self.ranks[1:], *self.nodes, *self.ranks[:1]]:
            run.finish(status)


def _run(common: dict[str, Any], labels: dict[str, object], node: str) -> Run:
    """One SDK run, blind to this machine's environment and host name."""
    return Run(**common, labels=labels, environ={}, hostname=node)
