"""Detection quality: the built-in rule pack over labelled runs of the demo's fault model, with
every kind near its threshold and telemetry as it really arrives.

Runs of several shapes and seeds, healthy ones among them, are recorded in simulated time with
their ground truth, made imperfect (hardware samples lost at random and in bursts, a node's
agent paused for 30-90 s while its ranks train, clocks a second apart, duplicated samples,
Student-t(3) loss noise, an agent reading interval that changes mid-run), and fed to the pack:
replayed as `stepwatch replay` would, or batch by batch out of order through the live detector
as the collector feeds it. Every run has the normal events that must not alert: learning-rate
warm-up, evaluation pauses, checkpoints, epoch boundaries and benign log lines. Next to each
fault near its line, the same kind below its line must raise nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from stepwatch.demo import FAULT_KINDS, DemoConfig, Fault, Imperfections, as_sent, record_scenario
from stepwatch.detect import (
    AlertRecord,
    AlertState,
    LiveAlert,
    LiveDetector,
    RuleFiles,
    Score,
    builtin_rules,
    replay,
    score,
    to_record,
)

TARGET = 0.97


@dataclass(frozen=True)
class Run:
    """One labelled run: its shape, its faults (near their line, or ``below`` it), how it
    reaches the pack, and whether its telemetry is imperfect."""

    seed: int
    nodes: int
    gpus: int
    seconds: float
    faults: tuple[str, ...] = ()
    below: tuple[str, ...] = ()  # faults on the healthy side of their line: nothing may fire
    live: bool = False
    messy: bool = True
    notes: dict[str, str] = field(default_factory=dict)


RUNS = [
    Run(21, 2, 4, 1500),
    Run(22, 3, 2, 1200, live=True),
    Run(23, 3, 4, 1200, ("straggler@300:rank5*1.25", "log_oom@900:node2")),
    Run(
        24,
        2,
        4,
        1000,
        (
            "gpu_thermal@200:node1/gpu2*81",
            "gpu_memory_pressure@300:node0/gpu1*0.91",
            "gpu_power_anomaly@300:node0/gpu3*0.25",
        ),
        ("gpu_thermal@200:node1/gpu0*76", "gpu_memory_pressure@300:node1/gpu3*0.85"),
        live=True,
    ),
    Run(25, 3, 2, 1300, ("dataloader_bottleneck@300:node1*0.3",)),
    Run(26, 4, 2, 1200, ("sync_latency@300:node2*2.5",), ("straggler@300:rank1*1.1",)),
    Run(36, 3, 4, 900, ("straggler@300:rank2*1.25",)),  # on node0, whose clock is 1 s ahead
    Run(27, 3, 2, 1300, ("step_time_regression@300*1.3",)),
    Run(
        28,
        3,
        2,
        1200,
        ("checkpoint_slow@100:node1*180", "gpu_underutilized@300:node0/gpu1*55"),
        ("dataloader_bottleneck@300:node2*0.1", "checkpoint_slow@100:node0*400"),
    ),
    Run(
        29,
        3,
        2,
        900,
        (
            "gpu_errors@300:node1/gpu0",
            "gpu_errors@400:node2/gpu1*48",
            "cpu_saturation@300:node0*99",
        ),
        ("cpu_saturation@300:node2*95",),
    ),
    Run(30, 2, 2, 900, ("grad_explosion@300*5", "grad_vanishing@600*5e-8")),
    Run(31, 3, 2, 1300, ("loss_spike@300*0.5", "loss_divergence@700*0.0006")),
    Run(
        32,
        3,
        2,
        800,
        (
            "log_nccl@200:node1",
            "log_io_error@300:node2",
            "log_nonfinite@400",
            "log_gpu_error@500:node0/gpu1",
            "nonfinite@700",
        ),
    ),
    Run(33, 3, 2, 1400, ("node_down@600:node2",), live=True),
    Run(
        34,
        2,
        2,
        3900,
        ("host_memory_leak@200:node1*6", "disk_full@200:node1*1.8", "loss_plateau@800"),
        ("host_memory_leak@200:node0*2.5",),
    ),
]


def _imperfections(run: Run) -> Imperfections:
    """What collection does to every messy run: the agents' reading interval doubles halfway."""
    return Imperfections(
        seed=run.seed,
        drop=0.05,
        bursts=2,
        gaps=1,
        gap_s=(30.0, 90.0),
        skew_s=1.0,
        duplicates=0.01,
        tails=0.015,
        slower_from_s=run.seconds / 2,
        slower_every_s=2.0,
    )


def _live_alerts(path: Path, seed: int) -> list[AlertRecord]:
    """The alerts the collector's live detector raises when the run's batches reach it in
    the order they arrive (each producer's in order, everyone's interleaved)."""
    fired: list[LiveAlert] = []
    live = LiveDetector(RuleFiles(base=builtin_rules()), lambda events: None)
    live.subscribe(lambda a: fired.append(a) if a.state == AlertState.FIRING else None)
    live.start()
    try:
        batches = as_sent(path, seed)
        for i in range(0, len(batches), 32):
            live.feed(batches[i : i + 32])
        live.flush()
    finally:
        live.stop()
    assert live.stats.samples == sum(len(b) for b in batches)
    assert (live.stats.dropped, live.stats.errors) == (0, 0)
    return [AlertRecord.of(a.kind, a.ts, a.labels) for a in fired]


@dataclass(frozen=True)
class Played:
    """Every run recorded and fed to the pack: where each went, and what it raised."""

    paths: list[Path]
    alerts: dict[Path, list[AlertRecord]]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    root = tmp_path_factory.mktemp("scenarios")
    rules = builtin_rules()
    paths, alerts = [], {}
    for run in RUNS:
        config = DemoConfig(
            nodes=run.nodes,
            gpus_per_node=run.gpus,
            seed=run.seed,
            duration_s=run.seconds,
            faults=tuple(Fault.parse(f) for f in (*run.faults, *run.below)),
        )
        mess = _imperfections(run) if run.messy else None
        path = record_scenario(config, root, imperfections=mess).path
        if run.live:
            alerts[path] = _live_alerts(path, run.seed)
        else:
            alerts[path] = [to_record(alert) for alert in replay(path, rules)]
        paths.append(path)
    return Played(paths, alerts)


#: What a paused agent may raise: recorded for people to see, paged to no one, and no incident.
NOT_PAGED = ("telemetry_gap",)


@pytest.fixture(scope="module")
def scored(played: Played) -> Score:
    alerts = [a for path in played.paths for a in played.alerts[path]]
    return score([a for a in alerts if a.kind not in NOT_PAGED], played.paths)


def _report(result: Score) -> str:
    missed = [
        f"missed {o.label.kind} {o.label.entity} on {o.run} (first alert {o.delay} s in)"
        for o in result.missed
    ]
    false = [f"false {i.kind} {i.entity} on {i.run}" for i in result.false_incidents]
    return "\n".join([result.table(), *missed, *false])


def test_every_kind_is_labelled_near_its_line(scored: Score) -> None:
    labelled = {kind for kind, k in scored.kinds.items() if k.labels}
    assert labelled == set(FAULT_KINDS)


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_kind_is_found_in_time_and_only_where_it_is(scored: Score, kind: str) -> None:
    k = scored.kinds[kind]
    assert k.labels and k.timely == k.labels, _report(scored)
    assert k.true_incidents == k.incidents, _report(scored)


def test_the_pack_meets_its_targets_on_imperfect_telemetry(scored: Score) -> None:
    kinds = list(scored.kinds.values())
    labels, timely = sum(k.labels for k in kinds), sum(k.timely for k in kinds)
    incidents, true = sum(k.incidents for k in kinds), sum(k.true_incidents for k in kinds)
    assert labels >= len(FAULT_KINDS) and timely / labels >= TARGET, _report(scored)
    assert true / incidents >= TARGET, _report(scored)


def test_healthy_runs_raise_no_alert(scored: Score) -> None:
    assert scored.clean_hours > 0.5
    assert scored.clean_false_incidents == 0, _report(scored)


def _below_line() -> list[tuple[Run, str]]:
    return [(run, fault) for run in RUNS for fault in run.below]


@pytest.mark.parametrize(("run", "spec"), _below_line(), ids=lambda x: getattr(x, "seed", x))
def test_the_same_fault_below_its_line_raises_nothing(played: Played, run: Run, spec: str) -> None:
    fault = Fault.parse(spec)
    path = played.paths[RUNS.index(run)]
    node = f"node{fault.node}" if fault.node is not None else None
    rank = str(fault.rank) if fault.rank is not None else None
    raised = [
        a
        for a in played.alerts[path]
        if a.kind == fault.kind
        and (node is None or a.labels.get("node") in (node, None))
        and (rank is None or str(a.labels.get("rank", rank)) == rank)
        and (fault.gpu is None or a.labels.get("gpu") in (fault.gpu, None))
    ]
    assert raised == []


def test_the_imperfections_reached_the_pack(played: Played) -> None:
    """A check of the input itself: each messy run has an agent gap of 30-90 s on some node
    while that node's ranks went on reporting their steps, and the clocks disagree."""
    for run, path in zip(RUNS, played.paths, strict=True):
        if not run.messy or any(f.startswith("node_down") for f in run.faults):
            continue  # a job that hangs for a lost node has no steps to go on
        table = pq.read_table(path / "metrics.parquet")
        gaps = []
        for n in range(run.nodes):
            on = table.filter(pc.equal(table["node"], f"node{n}"))
            hw = np.sort(on.filter(pc.starts_with(on["name"], "host."))["ts"].to_numpy())
            steps = on.filter(pc.equal(on["name"], "train.compute_time_s"))["ts"].to_numpy()
            for a, b in zip(hw[:-1], hw[1:], strict=True):
                if b - a >= 29 and ((steps > a) & (steps < b)).any():
                    gaps.append(b - a)
        assert gaps and max(gaps) < 95, (path.name, gaps)
