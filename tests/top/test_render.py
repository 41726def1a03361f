"""The frame drawn from a real snapshot shows the run, its progress, its GPUs and its alerts."""

from __future__ import annotations

import io
import math

import pytest
from rich.console import Console

from stepwatch.top import (
    AlertRow,
    Forecast,
    Snapshot,
    TopClient,
    format_duration,
    render,
    sparkline,
)

from .conftest import GPUS_PER_NODE, NODES, PLANNED, STEPS, Pushed


def text_of(snap: Snapshot, width: int = 100) -> str:
    out = io.StringIO()
    Console(file=out, width=width).print(render(snap))
    return out.getvalue()


def test_frame_of_a_running_run(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        text = text_of(client.snapshot(pushed.run_id))
    assert pushed.name in text and pushed.run_id in text and "running" in text
    assert f"step {STEPS - 1} / {PLANNED:,}" in text
    assert f"{STEPS / PLANNED:.1%}" in text and "ETA 16m" in text  # 970 steps at 1 step/s
    gpu_rows = [line for line in text.splitlines() if "GiB" in line]
    assert len(gpu_rows) == len(NODES) * GPUS_PER_NODE
    assert [line.split()[0] for line in gpu_rows[::GPUS_PER_NODE]] == list(NODES)
    assert "1 open alerts" in text and "gpu_hot" in text and "GPU 1 on node1" in text
    assert "loss_spike" not in text


def test_frame_of_a_run_without_data(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        text = text_of(client.snapshot(pushed.idle_id))
    assert "idle" in text and "no data yet" in text
    assert "no GPU readings" in text and "no open alerts" in text


def test_frame_fits_an_80_column_terminal(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        text = text_of(client.snapshot(pushed.run_id), width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "gpu_hot" in text


FORECAST = Forecast(
    eta_s=2 * 86400 + 7 * 3600 + 125,
    eta_s_p10=2 * 86400 + 5 * 3600,
    eta_s_p90=2 * 86400 + 11 * 3600,
    final_loss_p10=1.96243,
    final_loss_p50=1.97118,
    final_loss_p90=1.97952,
)


def test_the_forecast_shows_the_eta_with_its_interval_and_the_final_loss() -> None:
    snap = Snapshot("r", "r", "running", 0.0, planned_steps=10**6, step=10**5, forecast=FORECAST)
    text = text_of(snap, width=80)
    assert "ETA 2d 07h" in text.splitlines()[1]  # beside the progress, as before
    (row,) = [line for line in text.splitlines() if "forecast" in line]
    assert "ETA 2d 07h (2d 05h–2d 11h)" in row
    assert "final loss 1.971 (1.962–1.98)" in row
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_forecast_without_an_interval_shows_the_figure_alone() -> None:
    naive = Forecast(eta_s=245.0)  # the runs list's naive ETA: no forecast yet
    (row,) = [line for line in text_of(Snapshot("r", "r", "running", 0.0, forecast=naive))
              .splitlines() if "forecast" in line]  # fmt: skip
    assert "ETA 4m 05s · final loss –" in row and "(" not in row
    empty = text_of(Snapshot("r", "r", "running", 0.0))
    assert "forecast –" in empty and "ETA" not in empty


def test_alerts_unavailable_is_not_no_alerts() -> None:
    text = text_of(Snapshot("r", "r", "running", taken_at=0.0, alerts=None))
    assert "no open alerts" not in text and "offers none" in text


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0, 2.0, 3.0], "▁▅█"),
        ([2.0, 2.0], "▁▁"),
        ([1.0, math.nan, 3.0, math.inf], "▁×█×"),
        ([], ""),
    ],
)
def test_sparkline(values: list[float], expected: str) -> None:
    assert sparkline(values).plain == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (45.9, "45s"),
        (245, "4m 05s"),
        (3 * 3600 + 12 * 60, "3h 12m"),
        (2 * 86400 + 7 * 3600, "2d 07h"),
        (-5, "0s"),
    ],
)
def test_format_duration(seconds: float, expected: str) -> None:
    assert format_duration(seconds) == expected


def test_many_alerts_show_the_newest_and_the_count() -> None:
    alerts = tuple(
        AlertRow(f"rule{i}", "warning", f"alert number {i}", since=float(i)) for i in range(8)
    )
    text = text_of(Snapshot("r", "r", "running", taken_at=100.0, alerts=alerts))
    assert "8 open alerts (3 older not shown)" in text
    shown = [i for i in range(8) if f"alert number {i}" in text]
    assert shown == [3, 4, 5, 6, 7]


def test_a_row_per_node_when_a_row_per_gpu_does_not_fit(pushed: Pushed) -> None:
    with TopClient(pushed.url) as client:
        snap = client.snapshot(pushed.run_id)
    out = io.StringIO()
    Console(file=out, width=100).print(render(snap, height=12))
    lines = out.getvalue().splitlines()
    assert len(lines) <= 12
    assert any("util (mean)" in line for line in lines)
    rows = [line.split() for line in lines if "GiB" in line]
    assert [row[:2] for row in rows] == [[node, str(GPUS_PER_NODE)] for node in NODES]
    assert "71°C" in rows[1] and "1000 W" in " ".join(rows[1])  # hottest GPU, summed power
    assert "util (mean)" not in text_of(snap)  # room for every GPU: a row each
