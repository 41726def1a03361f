"""What `stepwatch demo` is asked to do, and what it reports when it ends."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._encryption import EncryptionKey
from ._fault_plan import FaultPlan
from ._faults import Fault
from ._shape import TrainingShape


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """How big the simulated job is, how fast it runs, and where the collector listens.

    Args:
        nodes: simulated hosts.
        gpus_per_node: simulated GPUs per host, one rank each.
        duration_s: stop by itself after this many seconds; None runs until Ctrl-C.
        store_path: the collector's DuckDB file (kept afterwards, so the run can be browsed).
        host: where the collector listens.
        port: preferred port; a free one is used when it is taken.
        step_interval_s: nominal wall time of one optimizer step.
        seed: makes the simulated run reproducible.
        hw_interval_s: how often GPU and host readings are taken.
        report_every_s: how often a progress line is printed.
        eval_every: an evaluation pause follows every this many steps.
        ckpt_every: a checkpoint is written every this many steps.
        planned_total_steps: the run's registered length; the demo ends there.
        flush_interval_s: how often each SDK run makes its buffer durable and ships it.
        spool_dir: where the SDK spools; None uses a temporary directory removed at the end.
        rules: rule files the collector runs besides the built-in pack (re-read on change).
        notify: the collector's notifications file (receivers and routes of alerts).
        faults: faults injected into the simulated run (none: a healthy run).
        encryption_key: encrypts the store and seals the spools (None: plain files).
    """

    nodes: int = 4
    gpus_per_node: int = 8
    duration_s: float | None = None
    store_path: Path = Path("stepwatch-demo.duckdb")
    host: str = "127.0.0.1"
    port: int = 7070
    step_interval_s: float = 0.5
    seed: int = 0
    hw_interval_s: float = 1.0
    report_every_s: float = 5.0
    eval_every: int = 200
    ckpt_every: int = 500
    planned_total_steps: int = 20_000
    flush_interval_s: float = 1.0
    spool_dir: Path | None = None
    rules: tuple[Path, ...] = ()
    notify: Path | None = None
    faults: tuple[Fault, ...] = ()
    encryption_key: EncryptionKey | None = None

    def __post_init__(self) -> None:
        if self.duration_s is not None and not self.duration_s > 0:
            raise ValueError(f"duration_s must be > 0 seconds, got {self.duration_s}")
        for name in ("hw_interval_s", "report_every_s", "flush_interval_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        FaultPlan(self.shape(), self.faults)  # every fault fits the cluster

    def shape(self) -> TrainingShape:
        """The simulated training this demo runs."""
        return TrainingShape(
            nodes=self.nodes,
            gpus_per_node=self.gpus_per_node,
            seed=self.seed,
            step_s=self.step_interval_s,
            planned_total_steps=self.planned_total_steps,
            eval_every=self.eval_every,
            ckpt_every=self.ckpt_every,
        )


@dataclass(frozen=True, slots=True)
class DemoSummary:
    """What the demo did: which run to look at, and how much it streamed."""

    run_id: str
    url: str
    status: str
    steps: int
    samples: int
    events: int
    elapsed_s: float
