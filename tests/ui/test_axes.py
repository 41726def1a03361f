"""Axis labels as the charts draw them: no tick label overlaps its neighbour or leaves its
canvas, on a narrow page and on the small multiples, by time and by step; rates read per
second; the alerts strip and the sync heatmap have time axes placed like what they show."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from .conftest import Dashboard, LiveDemo, wait_for_alert

#: Before the page's scripts: every text drawn on a canvas since the canvas was last cleared,
#: with where and how wide it was drawn (device pixels, as the canvas counts them).
RECORD_CANVAS_TEXT = """
(() => {
  const proto = CanvasRenderingContext2D.prototype;
  const fillText = proto.fillText;
  const clearRect = proto.clearRect;
  proto.clearRect = function (x, y, w, h) {
    const c = this.canvas;
    if (x === 0 && y === 0 && w >= c.width && h >= c.height) c.drawnTexts = [];
    return clearRect.call(this, x, y, w, h);
  };
  proto.fillText = function (text, x, y, ...rest) {
    const m = this.getTransform();
    (this.canvas.drawnTexts = this.canvas.drawnTexts || []).push({
      text: String(text), x: m.a * x + m.c * y + m.e, y: m.b * x + m.d * y + m.f,
      align: this.textAlign, width: this.measureText(String(text)).width, canvas: this.canvas.width,
    });
    return fillText.call(this, text, x, y, ...rest);
  };
})();
"""
NARROW = {"width": 420, "height": 900}
#: Pixels at least between two neighbouring labels.
MIN_GAP_PX = 4


def drawn_texts(chart: Locator) -> list[dict[str, Any]]:
    """The texts of the last drawing of the chart's canvas."""
    texts = chart.locator("canvas").first.evaluate("c => c.drawnTexts || []")
    return list(texts)


def x_label_rows(chart: Locator) -> list[list[dict[str, Any]]]:
    """The x axis's tick labels (the centred texts), a list per line drawn, left to right."""
    centred = [t for t in drawn_texts(chart) if t["align"] == "center"]
    assert centred, "the chart drew no x axis labels"
    rows = sorted({t["y"] for t in centred})
    return [sorted((t for t in centred if t["y"] == y), key=lambda t: t["x"]) for y in rows]


def assert_labels_fit(chart: Locator) -> None:
    """No x label overlaps its neighbour on its line, nor sticks out of the canvas."""
    for labels in x_label_rows(chart):
        for a, b in zip(labels, labels[1:], strict=False):
            room = (b["x"] - b["width"] / 2) - (a["x"] + a["width"] / 2)
            assert room >= MIN_GAP_PX, f"{a['text']!r} and {b['text']!r} overlap ({room:.1f} px)"
        for t in labels:
            assert t["x"] - t["width"] / 2 >= 0 and t["x"] + t["width"] / 2 <= t["canvas"], t


@pytest.fixture
def recording(page: Page) -> Page:
    """``page``, recording what its canvases draw."""
    page.add_init_script(RECORD_CANVAS_TEXT)
    return page


@pytest.mark.parametrize("x", ["step", "time"])
def test_narrow_overview_labels_do_not_overlap(
    recording: Page, live_demo: LiveDemo, x: str
) -> None:
    recording.set_viewport_size(NARROW)
    dashboard = Dashboard(recording, live_demo.url)
    dashboard.open("overview", run=live_demo.run_id, x=x)
    for name in ("train.loss", "train.lr", "train.grad_norm", "train.tokens_per_s"):
        chart = dashboard.chart(name, min_points=2)
        assert chart.bounding_box()["width"] <= NARROW["width"]  # type: ignore[index]
        assert_labels_fit(chart)


def test_small_multiples_labels_do_not_overlap(recording: Page, live_demo: LiveDemo) -> None:
    dashboard = Dashboard(recording, live_demo.url)
    dashboard.open("hardware", run=live_demo.run_id)
    for name in ("gpu.util_pct:node0", "gpu.temp_c:node1", "host.cpu_pct"):
        assert_labels_fit(dashboard.chart(name, min_points=2))


def test_rates_are_per_second(recording: Page, live_demo: LiveDemo) -> None:
    dashboard = Dashboard(recording, live_demo.url)
    dashboard.open("hardware", run=live_demo.run_id)
    for name in ("host.net_rx_bytes_per_s", "host.net_tx_bytes_per_s"):
        chart = dashboard.chart(name, min_points=2)
        y_drawn = [t for t in drawn_texts(chart) if t["align"] == "right"]
        y_labels = [t["text"] for t in y_drawn]
        assert y_labels and all(t.endswith("B/s") for t in y_labels), y_labels
        assert all(t["x"] - t["width"] >= 0 for t in y_drawn), y_drawn  # none cut at the left
        chart.locator(".u-over").hover()  # the legend tells the values under the cursor
        expect(chart.locator(".u-legend")).to_contain_text("B/s")
    memory = dashboard.chart("host.mem_used_bytes", min_points=2)
    y_labels = [t["text"] for t in drawn_texts(memory) if t["align"] == "right"]
    assert y_labels and not any(t.endswith("/s") for t in y_labels), y_labels


#: The geometry of a time axis and what it spans, read at one moment (a live view redraws).
_AXIS_GEOMETRY = """([frame, axis]) => {
    const f = document.querySelector(frame).getBoundingClientRect();
    const a = document.querySelector(axis);
    const ticks = Array.from(a.querySelectorAll("span")).map((s) => {
        const r = s.getBoundingClientRect();
        return { text: s.textContent, ts: Number(s.dataset.ts), left: r.left, right: r.right };
    });
    return { start: Number(a.dataset.start), end: Number(a.dataset.end), left: f.left,
             width: f.width, ticks };
}"""


def assert_axis_under(page: Page, frame: str, axis: str) -> None:
    """The time axis ``axis`` under ``frame`` (CSS selectors): its ticks in its range, each
    label centred where the frame puts that time, inside the frame, clear of its neighbours."""
    expect(page.locator(axis).locator("span").nth(1)).to_be_visible()
    g = page.evaluate(_AXIS_GEOMETRY, [frame, axis])
    left, width, ticks = g["left"], g["width"], g["ticks"]
    for t in ticks:
        assert g["start"] <= t["ts"] <= g["end"], t
        centre = left + width * (t["ts"] - g["start"]) / (g["end"] - g["start"])
        assert abs((t["left"] + t["right"]) / 2 - centre) <= 2, (t, centre)
        assert left <= t["left"] and t["right"] <= left + width, (t, left, width)
    for a, b in zip(ticks, ticks[1:], strict=False):
        assert a["right"] + MIN_GAP_PX <= b["left"], (a, b)


def test_alerts_strip_has_a_time_axis(page: Page, fault_demo: LiveDemo) -> None:
    wait_for_alert(fault_demo, "log_oom")
    for viewport in ({"width": 1440, "height": 900}, NARROW):  # then the same page narrowed
        page.set_viewport_size(viewport)  # type: ignore[arg-type]
        Dashboard(page, fault_demo.url).open("alerts", run=fault_demo.run_id)
        strip = '[data-chart="alerts.timeline"][data-ready="1"]'
        expect(page.locator(f"{strip} .mark").first).to_be_visible()
        spans = page.evaluate(
            """s => [s, s + ' [data-axis="time"]'].map((q) => {
                const d = document.querySelector(q).dataset;
                return [d.start, d.end];
            })""",
            strip,
        )
        assert spans[0] == spans[1]  # the axis spans what the marks are placed over
        assert_axis_under(page, f"{strip} .timeline", f'{strip} [data-axis="time"]')


def test_heatmap_has_a_time_axis(page: Page, fault_demo: LiveDemo) -> None:
    for viewport in ({"width": 1440, "height": 900}, NARROW):  # then the same page narrowed
        page.set_viewport_size(viewport)  # type: ignore[arg-type]
        dashboard = Dashboard(page, fault_demo.url)
        dashboard.open("heatmap", run=fault_demo.run_id)
        dashboard.chart("heatmap", min_points=8)
        assert_axis_under(page, ".heatmap-plot canvas", '[data-chart="heatmap"] [data-axis="time"]')


@pytest.mark.parametrize("view", ["runs", "overview", "hardware", "steptime", "heatmap", "alerts"])
def test_a_narrow_page_does_not_scroll_sideways(
    page: Page, fault_demo: LiveDemo, view: str
) -> None:
    if view == "alerts":
        wait_for_alert(fault_demo, "log_oom")
    page.set_viewport_size(NARROW)
    dashboard = Dashboard(page, fault_demo.url)
    expect(dashboard.open(view, run=fault_demo.run_id)).to_be_visible()
    charts = page.locator("[data-chart]")
    for i in range(charts.count()):
        expect(charts.nth(i)).to_have_attribute("data-ready", "1")
    if view in ("runs", "alerts"):
        expect(page.locator("[data-row]").first).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= NARROW["width"], f"{view} is {width} px wide"
