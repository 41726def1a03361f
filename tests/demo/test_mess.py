"""Imperfect telemetry: each imperfection does what it says to a recorded run, and only that;
the live path's batches carry every sample once, each producer's in order."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from stepwatch.demo import DemoConfig, Fault, Imperfections, as_sent, imperfect, record_scenario
from stepwatch.detect import Scenario

SECONDS = 400.0


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = DemoConfig(
        nodes=3,
        gpus_per_node=2,
        seed=8,
        duration_s=SECONDS,
        faults=(Fault("log_oom", 200.0, node=1),),
    )
    return record_scenario(config, tmp_path_factory.mktemp("clean")).path


def _apply(path: Path, mess: Imperfections) -> tuple[pa.Table, pa.Table, list[dict]]:
    table = pq.read_table(path / "metrics.parquet")
    lines = [json.loads(x) for x in (path / "logs.jsonl").read_text().splitlines()]
    messy, moved = imperfect(table, lines, mess, nodes=3)
    assert (np.diff(messy["ts"].to_numpy()) >= 0).all()
    return table, messy, moved


def _hardware(table: pa.Table) -> np.ndarray:
    return pc.starts_with(table["name"], "gpu.").to_numpy(zero_copy_only=False) | pc.starts_with(
        table["name"], "host."
    ).to_numpy(zero_copy_only=False)


def test_random_losses_take_hardware_samples_only(recorded: Path) -> None:
    table, messy, _ = _apply(recorded, Imperfections(seed=1, drop=0.05))
    lost = 1 - _hardware(messy).sum() / _hardware(table).sum()
    assert 0.04 < lost < 0.06
    assert (~_hardware(messy)).sum() == (~_hardware(table)).sum()


def test_an_agent_gap_silences_one_nodes_agent_while_its_ranks_go_on(recorded: Path) -> None:
    _, messy, _ = _apply(recorded, Imperfections(seed=2, gaps=1, gap_s=(60.0, 60.0)))
    found = []
    for n in range(3):
        on = messy.filter(pc.equal(messy["node"], f"node{n}"))
        agent = on.filter(on["rank"].is_null())["ts"].to_numpy()
        steps = on.filter(pc.equal(on["name"], "train.compute_time_s"))["ts"].to_numpy()
        for a, b in zip(agent[:-1], agent[1:], strict=True):
            if b - a > 30:
                found.append((n, b - a, ((steps > a) & (steps < b)).sum()))
    ((_, silent, steps_meanwhile),) = found
    assert 59 <= silent <= 62 and steps_meanwhile > 100


def test_skewed_clocks_move_each_nodes_samples_and_lines_together(recorded: Path) -> None:
    table, messy, lines = _apply(recorded, Imperfections(seed=3, skew_s=1.0))
    shifts = []
    for n in range(3):
        name = f"node{n}"
        before = table.filter(pc.equal(table["node"], name))["ts"].to_numpy()
        after = np.sort(messy.filter(pc.equal(messy["node"], name))["ts"].to_numpy())
        shifts.append(float(np.median(after - np.sort(before))))
    assert sorted(shifts) == pytest.approx([-1.0, 0.0, 1.0])
    oom = next(x for x in lines if "CUDA out of memory" in x["line"])
    assert oom["ts"] - 1_780_000_200 == pytest.approx(shifts[1], abs=0.01)


def test_duplicates_and_heavier_tails(recorded: Path) -> None:
    table, messy, _ = _apply(recorded, Imperfections(seed=4, duplicates=0.02, tails=0.05))
    assert 0.015 < messy.num_rows / table.num_rows - 1 < 0.025
    name = messy["name"].to_numpy(zero_copy_only=False)
    healthy = table.filter(pc.equal(table["name"], "train.grad_norm"))["value"].to_numpy()
    assert set(messy["value"].to_numpy()[name == "train.grad_norm"]) == set(healthy)
    loss = table.filter(pc.equal(table["name"], "train.loss"))["value"].to_numpy()
    assert not set(messy["value"].to_numpy()[name == "train.loss"]) & set(loss)


def test_the_reading_interval_can_change_mid_run(recorded: Path) -> None:
    mess = Imperfections(seed=5, slower_from_s=SECONDS / 2, slower_every_s=5.0)
    _, messy, _ = _apply(recorded, mess)
    temp = messy.filter(
        pc.and_(pc.equal(messy["name"], "gpu.temp_c"), pc.equal(messy["node"], "node0"))
    )
    ts = np.unique(temp["ts"].to_numpy()) - 1_780_000_000
    assert set(np.diff(ts[ts < 190])) == {1.0} and set(np.diff(ts[ts > 210])) == {5.0}


def test_bad_imperfections_are_refused() -> None:
    with pytest.raises(ValueError, match="drop must be a share"):
        Imperfections(drop=1.5)
    with pytest.raises(ValueError, match="gap_s must be"):
        Imperfections(gap_s=(90.0, 30.0))


def test_labels_keep_true_time(recorded: Path, tmp_path: Path) -> None:
    config = DemoConfig(
        nodes=3,
        gpus_per_node=2,
        seed=8,
        duration_s=SECONDS,
        faults=(Fault("log_oom", 200.0, node=1),),
    )
    mess = Imperfections(seed=6, skew_s=1.0, drop=0.1)
    messy = record_scenario(config, tmp_path, imperfections=mess).path
    assert Scenario.read(messy).labels == Scenario.read(recorded).labels


def test_batches_as_sent_carry_every_sample_once_each_producer_in_order(recorded: Path) -> None:
    batches = as_sent(recorded, seed=7)
    samples = [b for b in batches if len(b)]
    assert sum(len(b) for b in samples) == pq.read_metadata(recorded / "metrics.parquet").num_rows
    by_producer: dict[str, list[float]] = {}
    for b in samples:
        assert (np.diff(b.ts) >= 0).all()
        by_producer.setdefault(b.source, []).extend(b.ts.tolist())
    assert all(ts == sorted(ts) for ts in by_producer.values())
    assert {"rank0", "rank5", "node0", "node2"} <= set(by_producer)
    firsts = [float(b.ts[0]) for b in samples]
    assert firsts != sorted(firsts)  # the producers' batches interleave out of time order
    logged = [e.text for b in batches for e in b.events]
    assert len(logged) == len((recorded / "logs.jsonl").read_text().splitlines())
