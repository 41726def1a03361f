"""A labelled scenario recorded from the demo in simulated time: no collector, no waiting.

The same player that drives the live demo plays the run on a simulated clock into memory, and
the result is written in the scenario format (metrics.parquet, logs.jsonl, labels.json) with
the faults' ground truth, so detection can be replayed and scored against it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..model import RunStatus
from ..sdk import HEARTBEAT
from ._config import DemoConfig
from ._driver import Player
from ._fault_plan import FaultPlan
from ._fleet import HEARTBEAT_S
from ._hardware import HardwareSample
from ._mess import Imperfections, imperfect
from ._report import Reporter
from ._shape import TrainingShape
from ._training import StepMetrics

__all__ = ["ORIGIN_TS", "Recorder", "RecordedScenario", "record_scenario", "scenario_name"]

#: Data time at which a recorded run starts (seconds since the epoch; a date in mid-2026).
ORIGIN_TS = 1_780_000_000.0
#: Lines every training log has that are no sign of trouble.
BENIGN_LINES = (
    "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed "
    "explicitly; it will default to False in a future release.",
    "[W reducer.cpp:1389] Warning: find_unused_parameters=True was specified in DDP "
    "constructor, but did not find any unused parameters in the forward pass.",
)
_NONE = -1


@dataclass(frozen=True, slots=True)
class RecordedScenario:
    """Where a recorded scenario went and what it holds."""

    path: Path
    run: str
    samples: int
    log_lines: int
    labels: int
    steps: int
    simulated_s: float


class Recorder:
    """A Sink that keeps every sample and log line in memory, stamped by ``wall``.

    Like the SDK it stamps what is logged with the clock's time at the call, and every
    producer (each rank and each node's agent) sends a heartbeat every few seconds.
    """

    def __init__(self, shape: TrainingShape, run: str, wall: Callable[[], float]) -> None:
        self.shape, self.run, self._wall = shape, run, wall
        self.dropped: set[int] = set()
        self.status = RunStatus.RUNNING
        self._names: dict[str, int] = {}
        self._parts: list[tuple[np.ndarray, ...]] = []
        self.lines: list[dict[str, Any]] = []
        self._started = self._beat_due = wall()
        rank_node = np.arange(shape.ranks) // shape.gpus_per_node
        self._rank_node, self._rank_gpu = rank_node, np.arange(shape.ranks) % shape.gpus_per_node
        grid = (shape.nodes, shape.gpus_per_node)
        self._gpu_node = np.repeat(np.arange(shape.nodes), shape.gpus_per_node).reshape(grid)
        self._gpu_index = np.tile(np.arange(shape.gpus_per_node), shape.nodes).reshape(grid)
        for line in BENIGN_LINES:
            self.log_line(0, line)

    @property
    def samples(self) -> int:
        return sum(p[0].size for p in self._parts)

    def _add(
        self,
        names: list[str],
        values: np.ndarray,
        node: np.ndarray | int,
        rank: np.ndarray | int = _NONE,
        gpu: np.ndarray | int = _NONE,
        step: int = _NONE,
    ) -> int:
        """Samples at the clock's time: ``values[i, j]`` of metric ``names[i]`` at the ``j``-th
        of the places ``node``, ``rank`` and ``gpu`` (arrays of the places, or one for all)."""
        values = np.asarray(values, np.float64).reshape(len(names), -1)
        places = values.shape[1]
        codes = [self._names.setdefault(name, len(self._names)) for name in names]

        def tiled(col: np.ndarray | int) -> np.ndarray:
            return np.broadcast_to(np.asarray(col, np.int64), values.shape).ravel()

        self._parts.append(
            (
                np.full(values.size, self._wall()),
                np.repeat(np.asarray(codes, np.int32), places),
                values.ravel(),
                np.full(values.size, step, np.int64),
                tiled(node),
                tiled(rank),
                tiled(gpu),
            )
        )
        return values.size

    def log_step(self, m: StepMetrics) -> int:
        ranks = np.flatnonzero(~np.isin(self._rank_node, list(self.dropped)))
        nodes = self._rank_node[ranks]
        timings = np.stack([values[ranks] for values in m.timings.values()])
        logged = self._add(list(m.timings), timings, nodes, ranks, step=m.step)
        logged += self._add(list(m.train), np.array(list(m.train.values())), 0, 0, step=m.step)
        if m.ckpt_bytes:
            writers = np.array([n for n in range(self.shape.nodes) if n not in self.dropped])
            leaders = writers * self.shape.gpus_per_node
            ckpt = np.stack([m.ckpt_write_s[writers], np.full(writers.size, m.ckpt_bytes)])
            logged += self._add(["ckpt.write_s", "ckpt.bytes"], ckpt, writers, leaders, step=m.step)
        return logged

    def log_hardware(self, sample: HardwareSample) -> int:
        live = np.array([n not in self.dropped for n in range(self.shape.nodes)])
        gpu = np.stack([values[live].ravel() for values in sample.gpu.values()])
        node, index = self._gpu_node[live].ravel(), self._gpu_index[live].ravel()
        logged = self._add(list(sample.gpu), gpu, node, gpu=index)
        host = np.stack([values[live] for values in sample.host.values()])
        logged += self._add(list(sample.host), host, np.flatnonzero(live))
        self._beat(live)
        return logged

    def _beat(self, live: np.ndarray) -> None:
        """Every live producer's heartbeat, when due."""
        now = self._wall()
        if now < self._beat_due:
            return
        self._beat_due = now + HEARTBEAT_S
        ranks = np.flatnonzero(live[self._rank_node])
        since = now - self._started
        self._add([HEARTBEAT], np.full(ranks.size, since), self._rank_node[ranks], ranks)
        nodes = np.flatnonzero(live)
        self._add([HEARTBEAT], np.full(nodes.size, since), nodes)

    def event(self, kind: str, text: str, **data: Any) -> None:
        """A job event, as the line rank 0 writes to its log."""
        self.log_line(0, text)

    def log_line(self, rank: int, text: str) -> None:
        node = rank // self.shape.gpus_per_node
        if node not in self.dropped:
            self.lines.append(
                {
                    "run": self.run,
                    "ts": self._wall(),
                    "node": self.shape.node_name(node),
                    "rank": rank,
                    "line": text,
                }
            )

    def drop_node(self, node: int) -> None:
        self.dropped.add(node)

    def finish(self, status: str) -> None:
        self.status = status

    def table(self) -> pa.Table:
        """Every sample as a table in the scenario format, sorted by ts."""
        if not self._parts:
            raise ValueError("nothing was recorded")
        ts, code, value, step, node, rank, gpu = (
            np.concatenate(c) for c in zip(*self._parts, strict=True)
        )
        order = np.argsort(ts, kind="stable")
        names = pa.array(sorted(self._names, key=self._names.__getitem__))
        nodes = pa.array([self.shape.node_name(n) for n in range(self.shape.nodes)])

        def ints(col: np.ndarray) -> pa.Array:
            col = col[order]
            return pa.array(col, pa.int64(), mask=col == _NONE)

        return pa.table(
            {
                "ts": pa.array(ts[order]),
                "run": pa.array(np.full(ts.size, self.run)),
                "name": pa.DictionaryArray.from_arrays(code[order], names).cast(pa.string()),
                "value": pa.array(value[order]),
                "step": ints(step),
                "node": pa.DictionaryArray.from_arrays(
                    pa.array(node[order].astype(np.int32)), nodes
                ).cast(pa.string()),
                "rank": ints(rank),
                "gpu": ints(gpu),
            }
        )


@dataclass(slots=True)
class _SimClock:
    """Simulated seconds since the run began, and the data time they stand for."""

    origin: float
    now: float = 0.0

    def wall(self) -> float:
        return self.origin + self.now


def scenario_name(config: DemoConfig) -> str:
    """``demo-s<seed>-<fault kinds>`` or ``demo-s<seed>-clean``."""
    kinds = "-".join(dict.fromkeys(f.kind for f in config.faults)) or "clean"
    return f"demo-s{config.seed}-{kinds}"


def record_scenario(
    config: DemoConfig,
    root: str | Path,
    name: str | None = None,
    *,
    origin: float = ORIGIN_TS,
    imperfections: Imperfections | None = None,
) -> RecordedScenario:
    """Play ``config`` for its duration in simulated time and write ``root/<name>/``.

    Args:
        config: the run and its faults; ``duration_s`` is the simulated length.
        root: the folder the scenario's folder is made in.
        name: the scenario's folder and run id (default: ``scenario_name(config)``).
        origin: data time at which the run starts.
        imperfections: what real collection would have done to the samples and log lines
            (the labels keep true time); None records them as produced.
    """
    if config.duration_s is None:
        raise ValueError("a recorded scenario needs a duration")
    name = name or scenario_name(config)
    shape, clock = config.shape(), _SimClock(origin)
    faults = FaultPlan(shape, config.faults)
    recorder = Recorder(shape, name, clock.wall)
    player = Player(config, recorder, Reporter(config, lambda line: None), 0.0, faults)
    while True:
        clock.now = min(player.next_due(), config.duration_s)
        if clock.now >= config.duration_s or not player.advance(clock.now):
            break
    recorder.finish(RunStatus.FINISHED)
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    table, lines = recorder.table(), sorted(recorder.lines, key=lambda line: line["ts"])
    if imperfections is not None:
        table, lines = imperfect(table, lines, imperfections, shape.nodes)
    pq.write_table(table, folder / "metrics.parquet")
    with (folder / "logs.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    labels = faults.labels(origin, clock.now)
    meta = {
        "run": name,
        "nodes": shape.nodes,
        "gpus_per_node": shape.gpus_per_node,
        "steps": player.steps_done,
        "planned_total_steps": shape.planned_total_steps,
        "start": origin,
        "end": origin + clock.now,
        "faults": [f.text() for f in faults.placed],
        "labels": [label.as_json() for label in labels],
    }
    (folder / "labels.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return RecordedScenario(
        folder, name, table.num_rows, len(lines), len(labels), player.steps_done, clock.now
    )
