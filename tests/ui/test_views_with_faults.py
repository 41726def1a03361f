"""The analysis views on a demo with faults: runs compared, a node against its peers, step-time
percentiles and breakdown, the sync heatmap."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from playwright.sync_api import expect

from .conftest import Dashboard, LiveDemo

BASELINE = "baseline-for-compare"
#: A short second run logged through the SDK into the fault demo's collector.
_LOG_BASELINE = """
    import math, sys
    import stepwatch.sdk as sw
    sw.init(project="demo", name=sys.argv[2], server=sys.argv[1], dir=sys.argv[3],
            flush_interval_s=0.2, heartbeat_s=None)
    for step in range(120):
        sw.log({"train.loss": 6.0 * math.exp(-step / 80) + 2.0}, step=step)
    sw.finish()
"""


@pytest.fixture(scope="module")
def baseline(fault_demo: LiveDemo, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The id of a finished run ``BASELINE`` next to the fault demo's run."""
    spool = tmp_path_factory.mktemp("spool")
    script = textwrap.dedent(_LOG_BASELINE)
    subprocess.run(
        [sys.executable, "-c", script, fault_demo.url, BASELINE, str(spool)],
        check=True,
        timeout=120,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for run in fault_demo.api("runs/summary"):
            if run["name"] == BASELINE and (run["step"] or 0) >= 119:
                return str(run["id"])
        time.sleep(0.2)
    raise AssertionError(f"the run {BASELINE} did not arrive")


def test_compare_overlays_two_runs(
    fault_dashboard: Dashboard, fault_demo: LiveDemo, baseline: str
) -> None:
    dashboard = fault_dashboard
    view = dashboard.open("compare", run=fault_demo.run_id)
    box = view.locator(f'[data-run-id="{fault_demo.run_id}"] input')
    expect(box).to_be_checked()  # the run shown is picked already
    view.locator(f'[data-run-id="{baseline}"] input').check()

    chart = dashboard.chart("compare:train.loss", min_points=10)
    legend = chart.locator(".u-legend")
    expect(legend).to_contain_text(BASELINE)
    expect(legend).to_contain_text(fault_demo.run()["name"])


def test_node_against_its_peers(fault_dashboard: Dashboard, fault_demo: LiveDemo) -> None:
    view = fault_dashboard.open(
        "node", run=fault_demo.run_id, metric="gpu.temp_c", node="node1", gpu="1"
    )
    chart = fault_dashboard.chart("node:gpu.temp_c", min_points=2)
    expect(chart.locator(".u-legend")).to_contain_text("peers median")
    expect(view).to_contain_text("node1")


def test_step_time_percentiles_and_breakdown(
    fault_dashboard: Dashboard, fault_demo: LiveDemo
) -> None:
    fault_dashboard.open("steptime", run=fault_demo.run_id)
    p = fault_dashboard.chart("train.step_time_s", min_points=2)
    for q in ("P50", "P90", "P99"):
        expect(p.locator(".u-legend")).to_contain_text(q)
    breakdown = fault_dashboard.chart("steptime.breakdown", min_points=2)
    for part in ("data", "compute", "comm"):
        expect(breakdown.locator(".u-legend")).to_contain_text(part)


def test_sync_heatmap_has_a_row_per_rank(fault_dashboard: Dashboard, fault_demo: LiveDemo) -> None:
    view = fault_dashboard.open("heatmap", run=fault_demo.run_id)
    fault_dashboard.chart("heatmap", min_points=8)
    expect(view.locator(".heatmap-ranks > div")).to_have_count(4)  # 2 nodes x 2 GPUs
    expect(view).to_contain_text("4 ranks")
    # The waited-on rank waits least in the collectives: a straggler is the one cold row.
    expect(view).to_contain_text("(a straggler) is the one cold row")
