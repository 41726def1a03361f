"""A snapshot built from a real collector's API says what was pushed through the SDK."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.sdk import Run
from stepwatch.top import Forecast, TopClient, TopError

from .conftest import GPUS_PER_NODE, NODES, PLANNED, STEPS, Pushed, loss_at, lr_at


def test_snapshot_of_a_running_run(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        snap = client.snapshot(pushed.run_id)
    assert (snap.name, snap.status) == (pushed.name, "running")
    assert (snap.step, snap.planned_steps) == (STEPS - 1, PLANNED)
    assert snap.loss == pytest.approx(loss_at(STEPS - 1))
    assert snap.lr == pytest.approx(lr_at(STEPS - 1))
    assert snap.tokens_per_s == pytest.approx(2.5e6)
    assert snap.loss_recent[-1] == pytest.approx(loss_at(STEPS - 1))
    assert list(snap.loss_recent) == sorted(snap.loss_recent, reverse=True)  # the loss falls
    assert snap.steps_per_s == pytest.approx(1.0)  # one step a simulated second
    assert snap.forecast.eta_s == pytest.approx(PLANNED - STEPS)  # the runs list's
    assert snap.progress == pytest.approx(STEPS / PLANNED)


def test_snapshot_lists_every_gpu_by_node(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        gpus = client.snapshot(pushed.run_id).gpus
    expected = [(node, str(g)) for node in NODES for g in range(GPUS_PER_NODE)]
    assert [(g.node, g.gpu) for g in gpus] == expected
    assert [g.temp_c for g in gpus] == [60.0, 61.0, 70.0, 71.0]
    assert {(g.mem_total_bytes, g.power_w, g.power_limit_w) for g in gpus} == {(80e9, 500, 700)}


def test_step_times_are_medians_across_ranks(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        times = client.snapshot(pushed.run_id).step_times
    assert times.compute_s == pytest.approx(0.080, rel=0.02)
    assert times.comm_s == pytest.approx(0.015, rel=0.02)
    assert 0.002 <= (times.data_s or 0) <= 0.005
    assert times.p50_s is not None and times.p99_s is not None
    assert 0.097 <= times.p50_s <= times.p99_s <= 0.1 * 1.02


def test_open_alerts_leave_out_resolved_ones(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        alerts = client.snapshot(pushed.run_id).alerts
    assert alerts is not None
    assert [(a.name, a.severity) for a in alerts] == [("gpu_hot", "warning")]
    assert "node1" in alerts[0].summary


def test_a_run_without_data(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        snap = client.snapshot(pushed.idle_id)
    assert (snap.step, snap.loss, snap.gpus, snap.alerts, snap.forecast) == (
        None,
        None,
        (),
        (),
        Forecast(),
    )


def test_pick_run_prefers_the_latest_running_run(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        assert client.pick_run() == pushed.run_id


def test_unknown_run_and_unreachable_collector_are_top_errors(pushed: Pushed, port: int) -> None:
    with TopClient(pushed.url) as client, pytest.raises(TopError, match="no run 'nope'"):
        client.snapshot("nope")
    with TopClient(f"http://127.0.0.1:{port}") as client, pytest.raises(TopError, match="reach"):
        client.pick_run()


def test_an_alert_the_collector_raised_on_sdk_data_is_listed(server: Any, tmp_path: Path) -> None:
    """A NaN loss logged through the SDK: the collector's own alert is in the snapshot."""
    run = Run(name="nan loss", server=server.url, dir=tmp_path, environ={}, heartbeat_s=None)
    try:
        run.log({"loss": 2.0}, step=0)
        run.log({"loss": math.nan}, step=1)
        run.flush()
        deadline = time.monotonic() + 30
        while not httpx.get(f"{server.url}/api/v1/alerts", params={"run": run.id}).json():
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        with TopClient(server.url) as client:
            alerts = client.snapshot(run.id).alerts
    finally:
        run.finish()
    assert alerts is not None
    assert [(a.name, a.severity) for a in alerts] == [("nonfinite_loss", "critical")]
    assert alerts[0].summary.startswith("loss is nan")
