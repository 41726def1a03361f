"""node_down and telemetry_gap of the built-in pack over recorded multi-node runs built here:
a node is down only when every producer on it falls silent; one silent producer is a gap."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stepwatch.detect import Engine, RuleSet, builtin_rules, replay
from stepwatch.detect.live._reorder import ReorderBuffer
from stepwatch.model import NO_STEP, SampleBatch, SeriesKey

T0 = 1_780_000_000.0
NODES, GPUS, END = 3, 2, 900.0
HW_EVERY_S, BEAT_S, STEP_S = 5.0, 5.0, 1.0
KINDS = ("node_down", "telemetry_gap")
Row = tuple[float, str, dict[str, str], int, float]  # ts, metric, labels, step, value


@dataclass
class Cluster:
    """A synchronous job on NODES nodes of GPUS ranks, and what stops when (seconds from T0).

    ``agent_gap``: node -> (from, to) in which its agent sends nothing; ``dies``: node -> when
    it is lost (every producer on it stops; no step completes anywhere after); ``crash``:
    rank -> when its process dies (no step completes anywhere after, its agent goes on);
    ``heartbeats``: the SDK processes and agents send stepwatch.heartbeat_s as they do for
    real (the generated scenarios have none); ``ranks``: whether any SDK process reports;
    ``pause``: (from, to) of an evaluation, in which no step completes anywhere.
    Every node's clock is off by up to a second, and 5 % of the agents' samples are lost.
    """

    agent_gap: dict[int, tuple[float, float]] = field(default_factory=dict)
    dies: dict[int, float] = field(default_factory=dict)
    crash: dict[int, float] = field(default_factory=dict)
    heartbeats: bool = False
    ranks: bool = True
    pause: tuple[float, float] = (math.inf, math.inf)

    def hang(self) -> float:
        return min([*self.dies.values(), *self.crash.values(), math.inf])

    def rows(self) -> list[Row]:
        """Everything the job sends, in time order."""
        rng = np.random.default_rng(7)
        skew = rng.uniform(-1.0, 1.0, NODES)
        rows = [
            (t + skew[node], name, labels, step, value)
            for node in range(NODES)
            for t, name, labels, step, value in self._node(node, rng)
        ]
        return sorted(rows, key=lambda r: r[0])

    def _node(self, node: int, rng: np.random.Generator) -> list[Row]:
        alive = self.dies.get(node, math.inf)
        gap = self.agent_gap.get(node, (math.inf, math.inf))
        run_node = {"run": "job", "node": f"node{node}"}
        rows: list[Row] = []
        for t in np.arange(HW_EVERY_S, END, HW_EVERY_S):
            if t >= alive or gap[0] <= t < gap[1]:
                continue
            gpus = [{**run_node, "gpu": str(g)} for g in range(GPUS)]
            agent = [("host.cpu_pct", run_node, NO_STEP, 30.0)]
            agent += [("gpu.util_pct", labels, NO_STEP, 90.0) for labels in gpus]
            rows += [(t, *a) for a in agent if rng.random() >= 0.05]
            if self.heartbeats:
                rows.append((t + 0.3, "stepwatch.heartbeat_s", run_node, NO_STEP, t))
        for rank in range(node * GPUS, (node + 1) * GPUS) if self.ranks else ():
            labels = {**run_node, "rank": str(rank)}
            gone = min(alive, self.crash.get(rank, math.inf))
            steps = np.arange(STEP_S, min(END, self.hang()), STEP_S)
            steps = steps[(steps < self.pause[0]) | (steps >= self.pause[1])]
            rows += [(t, "train.step_time_s", labels, int(t), STEP_S) for t in steps]
            if rank == 0:
                rows += [(t, "train.loss", labels, int(t), 2.0) for t in steps]
            if self.heartbeats:  # a hung process beats on; a lost or crashed one does not
                beats = np.arange(BEAT_S, min(END, gone), BEAT_S)
                rows += [(t + 0.1, "stepwatch.heartbeat_s", labels, NO_STEP, t) for t in beats]
        return rows


def _record(cluster: Cluster, where: Path) -> Path:
    rows = cluster.rows()
    columns = {
        "ts": pa.array([T0 + r[0] for r in rows], pa.float64()),
        "run": pa.array([r[2]["run"] for r in rows]),
        "name": pa.array([r[1] for r in rows]),
        "value": pa.array([r[4] for r in rows], pa.float64()),
        "step": pa.array([None if r[3] == NO_STEP else r[3] for r in rows], pa.int64()),
        "node": pa.array([r[2]["node"] for r in rows]),
        "rank": pa.array([int(r[2]["rank"]) if "rank" in r[2] else None for r in rows], pa.int64()),
        "gpu": pa.array([int(r[2]["gpu"]) if "gpu" in r[2] else None for r in rows], pa.int64()),
    }
    where.mkdir(parents=True)
    pq.write_table(pa.table(columns), where / "metrics.parquet")
    (where / "logs.jsonl").write_text("")
    return where


def _replayed(cluster: Cluster, tmp_path: Path) -> list[tuple[str, dict[str, str], float, float]]:
    """(kind, labels, since, ts) of the node rules' alerts a replay of the job raises."""
    alerts = replay(_record(cluster, tmp_path / "job"), builtin_rules())
    return [(a.kind, a.labels, a.since - T0, a.ts - T0) for a in alerts if a.kind in KINDS]


@pytest.mark.parametrize("heartbeats", [False, True], ids=["no heartbeats", "heartbeats"])
def test_an_agent_that_pauses_90_s_while_its_ranks_train_is_a_gap_not_a_lost_node(
    heartbeats: bool, tmp_path: Path
) -> None:
    found = _replayed(Cluster(agent_gap={1: (300.0, 390.0)}, heartbeats=heartbeats), tmp_path)
    ((kind, labels, since, ts),) = found
    assert (kind, labels) == ("telemetry_gap", {"run": "job", "node": "node1", "producer": "agent"})
    assert 294 <= since <= 301 and 355 <= ts <= 362


@pytest.mark.parametrize("heartbeats", [False, True], ids=["no heartbeats", "heartbeats"])
def test_a_node_that_dies_is_down_within_70_s_and_no_gap_is_raised(
    heartbeats: bool, tmp_path: Path
) -> None:
    found = _replayed(Cluster(dies={2: 500.0}, heartbeats=heartbeats), tmp_path)
    ((kind, labels, since, ts),) = found
    assert (kind, labels) == ("node_down", {"run": "job", "node": "node2"})
    assert 494 <= since <= 501 and ts - 500 <= 70


def test_an_agent_that_pauses_after_a_lost_node_hung_the_job_is_no_second_lost_node(
    tmp_path: Path,
) -> None:
    found = _replayed(Cluster(dies={2: 400.0}, agent_gap={1: (600.0, 690.0)}), tmp_path)
    assert [(k, lab["node"]) for k, lab, _, _ in found] == [("node_down", "node2")]


@pytest.mark.parametrize("heartbeats", [False, True], ids=["no heartbeats", "heartbeats"])
def test_an_agent_that_restarts_during_an_evaluation_pause_is_no_lost_node(
    heartbeats: bool, tmp_path: Path
) -> None:
    paused = Cluster(pause=(300.0, 390.0), agent_gap={1: (330.0, 400.0)}, heartbeats=heartbeats)
    found = _replayed(paused, tmp_path)
    assert "node_down" not in [kind for kind, *_ in found]
    if heartbeats:  # the ranks' processes beat through the pause: the agent alone was silent
        assert [(k, lab["producer"]) for k, lab, _, _ in found] == [("telemetry_gap", "agent")]


def test_a_node_without_training_processes_is_down_when_its_agent_falls_silent(
    tmp_path: Path,
) -> None:
    found = _replayed(Cluster(dies={1: 400.0}, ranks=False), tmp_path)
    assert [(k, lab["node"]) for k, lab, _, _ in found] == [("node_down", "node1")]
    assert found[0][3] - 400 <= 70


def test_a_crashed_training_process_is_no_lost_node(tmp_path: Path) -> None:
    assert _replayed(Cluster(crash={3: 400.0}), tmp_path) == []  # its steps alone say nothing
    (gap,) = _replayed(Cluster(crash={3: 400.0}, heartbeats=True), tmp_path / "beating")
    assert gap[:2] == ("telemetry_gap", {"run": "job", "node": "node1", "producer": "rank3"})


def _batches(cluster: Cluster, per_s: float) -> list[SampleBatch]:
    """The job's samples as each producer's batches of ``per_s`` seconds, each sent
    0-1.5 s late: the arrival order of the live path, not the data's."""
    rng = np.random.default_rng(3)
    parts: dict[tuple[str, str, int], list[tuple[float, SeriesKey, int, float]]] = {}
    for ts, name, labels, step, value in cluster.rows():
        sender = (labels["node"], labels.get("rank", "agent"), int(ts // per_s))
        parts.setdefault(sender, []).append((ts, SeriesKey.of(name, labels), step, value))
    sent = sorted(parts.values(), key=lambda p: p[-1][0] + rng.uniform(0, 1.5))
    out = []
    for rows in sent:
        keys = list(dict.fromkeys(r[1] for r in rows))
        out.append(
            SampleBatch(
                "test",
                0,
                keys,
                np.array([keys.index(r[1]) for r in rows], np.uint32),
                np.array([T0 + r[0] for r in rows]),
                np.array([r[2] for r in rows], np.int64),
                np.array([r[3] for r in rows]),
            )
        )
    return out


def _live(cluster: Cluster) -> list[tuple[str, str, dict[str, str], float]]:
    """(kind, state, labels, ts) of the node rules' alert transitions when the job's batches
    reach the engine as in the collector: through a reorder window of 2 s of data time."""
    nodes = RuleSet(tuple(r for r in builtin_rules().rules if r.kind in KINDS))
    engine, held = Engine(nodes), ReorderBuffer(lateness_s=2.0)
    alerts = []
    for i, batch in enumerate(_batches(cluster, per_s=1.0)):
        held.add(batch, np.arange(len(batch)))
        if i % 10 == 9 and (released := held.release()) is not None:  # every few arrivals
            alerts += engine.process(released)
    if (rest := held.release(force=True)) is not None:
        alerts += engine.process(rest)
    assert held.late == 0
    return [(a.kind, a.state, a.labels, a.ts - T0) for a in alerts if a.kind in KINDS]


def test_batches_out_of_order_through_the_reorder_window_give_the_replay_s_alerts(
    tmp_path: Path,
) -> None:
    cluster = Cluster(agent_gap={0: (200.0, 300.0)}, dies={2: 600.0}, heartbeats=True)
    expected = _replayed(cluster, tmp_path)
    assert [k for k, _, _, _ in expected] == ["telemetry_gap", "node_down"]
    firing = [(k, lab, ts) for k, state, lab, ts in _live(cluster) if state == "firing"]
    assert [(k, lab) for k, lab, _ in firing] == [(k, lab) for k, lab, _, _ in expected]
    for (_, _, ts), (_, _, _, ts0) in zip(firing, expected, strict=True):
        assert abs(ts - ts0) <= 2.0


def test_a_gap_resolves_when_its_producer_is_heard_again() -> None:
    gap = [(state, ts) for _, state, _, ts in _live(Cluster(agent_gap={1: (300.0, 390.0)}))]
    assert [state for state, _ in gap] == ["firing", "resolved"]
    assert 389 <= gap[1][1] <= 396
