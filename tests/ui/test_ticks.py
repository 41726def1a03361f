"""The tick picker of the chart axes (``js/ticks.js``) in Chromium, over spans from seconds to
weeks and widths from a small multiple to a wide screen: labels measured in the axis font never
overlap nor leave the axis, tell neighbouring ticks apart, and get shorter before they get fewer."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

from .conftest import LiveDemo

#: Runs in the page: every (kind, span, width) case, its ticks and the label widths measured.
PICK_TICKS = """
async ([spans, widths, steps, shifts]) => {
  const t = await import("/ui/js/ticks.js");
  const round = 1796100000;  // any instant: ticks fall on local time, whatever the zone
  const cases = [];
  for (const px of widths) {
    for (const span of spans) {
      for (const end of shifts.map((s) => round + s * span)) {
        cases.push(["time", end - span, end, px, t.timeTicks(end - span, end, px)]);
      }
    }
    for (const [a, b] of steps) cases.push(["step", a, b, px, t.numberTicks(a, b, px)]);
  }
  return cases.map(([kind, min, max, px, got]) => ({
    kind, min, max, px, splits: got.splits, labels: got.labels,
    widths: got.labels.map((s) => t.textWidth(s)),
  }));
}
"""
MINUTE, HOUR, DAY = 60, 3600, 86400
SPANS = [2.5, 8, 45, 5 * MINUTE, 40 * MINUTE, 3 * HOUR, 20 * HOUR, 2.5 * DAY, 12 * DAY, 60 * DAY]
WIDTHS = [90, 150, 240, 285, 420, 800, 1400]
#: Where in its span the round instant falls (0: at its end): so a span's ticks also fall near
#: its edges, where a label may not fit.
SHIFTS = [0, 0.07, 0.45, 0.93]
STEPS = [
    (0, 12),
    (3, 7),
    (17, 21),
    (0, 130),
    (95, 4321),
    (0, 250_000),
    (1_234_000, 1_234_600),
    (0, 3_000_000_000),
]


def _cases(page: Page, url: str) -> list[dict[str, Any]]:
    page.goto(f"{url}/#/runs")
    return list(page.evaluate(PICK_TICKS, [SPANS, WIDTHS, STEPS, SHIFTS]))


def test_labels_never_overlap_nor_leave_the_axis(page: Page, live_demo: LiveDemo) -> None:
    for case in _cases(page, live_demo.url):
        where = f"{case['kind']} {case['min']}..{case['max']} on {case['px']} px: {case['labels']}"
        scale = case["px"] / (case["max"] - case["min"])
        at = [(v - case["min"]) * scale for v in case["splits"]]
        half = [w / 2 for w in case["widths"]]
        assert case["splits"] == sorted(set(case["splits"])), where
        assert all(case["min"] <= v <= case["max"] for v in case["splits"]), where
        labels = case["labels"]
        if case["kind"] == "step":
            assert len(set(labels)) == len(labels), where
        else:  # the time of day repeats from one day to the next, with the day between
            assert all(a != b for a, b in zip(labels, labels[1:], strict=False)), where
        for i in range(len(at) - 1):
            assert at[i] + half[i] < at[i + 1] - half[i + 1], where
        assert all(x - h >= 0 and x + h <= case["px"] for x, h in zip(at, half, strict=True)), where
        assert case["labels"], where  # an axis always names some tick, near its edges too


def test_narrow_axes_get_shorter_labels_and_fewer_ticks(page: Page, live_demo: LiveDemo) -> None:
    cases = _cases(page, live_demo.url)
    for kind in ("time", "step"):
        by_width: dict[float, list[int]] = {}
        for c in cases:
            if c["kind"] == kind:
                by_width.setdefault(c["px"], []).append(len(c["labels"]))
        counts = [sum(by_width[px]) for px in sorted(by_width)]
        assert counts == sorted(counts) and counts[0] < counts[-1], (kind, counts)
    hour_wide = [c for c in cases if c["kind"] == "time" and c["max"] - c["min"] == 40 * MINUTE]
    narrow = hour_wide[0]
    wide = [c for c in hour_wide if c["min"] == narrow["min"]][-1]
    assert max(narrow["widths"], default=0) <= max(wide["widths"]), (narrow, wide)
