"""Zooming a chart (drag across it) narrows its range and refetches it at finer resolution;
the range control's reset goes back to the whole run, live."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import Request, expect

from .conftest import Dashboard, LiveDemo

CHART = "train.loss"


def _range(dashboard: Dashboard) -> tuple[float, float]:
    box = dashboard.page.locator(f'[data-chart="{CHART}"]')
    return float(box.get_attribute("data-start") or "nan"), float(
        box.get_attribute("data-end") or "nan"
    )


def _loss_queries(requests: list[Request]) -> list[dict[str, list[str]]]:
    """Query parameters of the loss chart's data requests, in the order they went out."""
    out = []
    for r in requests:
        parts = urlsplit(r.url)
        query = parse_qs(parts.query)
        if parts.path.endswith("/query/multi") and query.get("name") == [CHART]:
            out.append(query)
    return out


def test_drag_zoom_refetches_the_narrower_range(dashboard: Dashboard, live_demo: LiveDemo) -> None:
    page = dashboard.page
    requests: list[Request] = []
    page.on("request", lambda r: requests.append(r))
    dashboard.open("overview", run=live_demo.run_id, x="time")
    chart = dashboard.chart(CHART, min_points=10)
    start, end = _range(dashboard)
    before = _loss_queries(requests)[-1]
    width = (end - start) / int(before["points"][0])  # seconds per point before the zoom

    over = chart.locator(".u-over")
    over.scroll_into_view_if_needed()  # panels above it grow as the run goes on
    box = over.bounding_box()
    assert box is not None
    # A followed run's axis runs on past its data (the forecast cone): drag within the data,
    # over a quarter of its span.
    axis_end = max(end, float(chart.get_attribute("data-x-end") or end))
    data_width = box["width"] * (end - start) / (axis_end - start)
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + data_width * 0.35, y)
    page.mouse.down()
    page.mouse.move(box["x"] + data_width * 0.5, y, steps=5)
    page.mouse.move(box["x"] + data_width * 0.6, y, steps=5)
    page.mouse.up()

    expect(page).to_have_url(re.compile(r"[?&]from=.*&to="))
    hash_params = parse_qs(urlsplit(page.url).fragment.partition("?")[2])
    zoomed_start, zoomed_end = float(hash_params["from"][0]), float(hash_params["to"][0])
    page.wait_for_function(
        """([name, a, b]) => {
            const c = document.querySelector(`[data-chart="${name}"]`);
            return c.dataset.ready === "1" && Number(c.dataset.start) === a
                && Number(c.dataset.end) === b;
        }""",
        arg=[CHART, zoomed_start, zoomed_end],
    )
    assert start < zoomed_start < zoomed_end and zoomed_end - zoomed_start < end - start
    asked = [
        q
        for q in _loss_queries(requests)
        if float(q["start"][0]) == zoomed_start and float(q["end"][0]) == zoomed_end
    ]
    assert asked, "no request asked for the zoomed range"
    assert (zoomed_end - zoomed_start) / int(asked[-1]["points"][0]) < width / 2
    assert int(chart.get_attribute("data-points") or 0) >= 2
    expect(page.locator("[data-range]")).not_to_contain_text("live")

    page.get_by_role("button", name="Reset zoom").click()
    expect(page).not_to_have_url(re.compile("from="))
    page.wait_for_function(
        """([name, a]) => {
            const c = document.querySelector(`[data-chart="${name}"]`);
            return c.dataset.ready === "1" && Number(c.dataset.start) <= a;
        }""",
        arg=[CHART, start],
    )
    expect(page.locator("[data-range]")).to_contain_text("live")
