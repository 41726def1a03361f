"""The dashboard opens on a live collector, lists the run, and logs no errors doing so."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from .conftest import Dashboard, LiveDemo


def test_page_lists_the_live_run(page: Page, live_demo: LiveDemo) -> None:
    run = live_demo.run()
    page.goto(f"{live_demo.url}/")
    expect(page).to_have_title(re.compile("stepwatch"))
    expect(page.locator("body")).to_contain_text(run["name"])


def test_runs_route_lists_the_live_run(dashboard: Dashboard, live_demo: LiveDemo) -> None:
    dashboard.open("runs")
    expect(dashboard.page.locator("body")).to_contain_text(live_demo.run()["name"])


def test_console_errors_are_collected(page: Page, page_errors: list[str]) -> None:
    page.set_content("<script>console.error('broken on purpose')</script>")
    page.evaluate("setTimeout(() => { throw new Error('thrown on purpose'); })")
    page.wait_for_timeout(100)
    assert any("broken on purpose" in e for e in page_errors), page_errors
    assert any("thrown on purpose" in e for e in page_errors), page_errors
    page_errors.clear()


#: Each view, and a chart it draws from the demo's data (None: a view without charts for it).
VIEWS = {
    "runs": None,
    "overview": "train.loss",
    "hardware": "gpu.util_pct:node0",
    "steptime": "train.step_time_s",
    "heatmap": "heatmap",
    "node": "node:gpu.util_pct",
    "alerts": None,
    "logs": None,
    "compare": None,
}


@pytest.mark.parametrize("demo", ["live_demo", "fault_demo"])
@pytest.mark.parametrize(("view", "chart"), VIEWS.items())
def test_every_view_opens_and_draws(
    view: str, chart: str | None, demo: str, page: Page, request: pytest.FixtureRequest
) -> None:
    """On the plain demo and on the one with faults (their alerts mark the charts)."""
    running: LiveDemo = request.getfixturevalue(demo)
    dashboard = Dashboard(page, running.url)
    expect(dashboard.open(view, run=running.run_id)).to_be_visible()
    if chart is not None:
        dashboard.chart(chart, min_points=2)
    charts = dashboard.page.locator("[data-chart]")
    for i in range(charts.count()):
        expect(charts.nth(i)).to_have_attribute("data-ready", "1")
