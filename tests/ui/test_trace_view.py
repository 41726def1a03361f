"""The trace view: a run's page lists its profiler traces; one opens with its breakdown, its
operator table and its profiled step drawn as a timeline; a second rank's trace goes beside
it; the download link gives the gzip Chrome trace (what Perfetto opens)."""

from __future__ import annotations

import gzip
import re
from typing import Any

import httpx
import pytest
from _profiles import cpu_trace
from playwright.sync_api import Page, expect

from .conftest import Dashboard

T0 = 1_780_000_000.0
#: How many pixels of a timeline's canvas are drawn on (not transparent).
_INKED = """wrap => {
    const c = wrap.querySelector("canvas");
    const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n += 1;
    return n;
}"""


@pytest.fixture(scope="module")
def profiled(
    module_collector_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str, list[str]]:
    """A collector with a run of a few steps and a trace of each of its two ranks: its URL,
    the run id and the traces' ids (rank 0's first)."""
    collector = module_collector_factory()
    home = tmp_path_factory.mktemp("traces")
    run = "traced-run"
    with httpx.Client(base_url=collector.url, timeout=30) as api:
        body = {"id": run, "project": "ui-tests", "name": "traced", "start": T0}
        assert api.post("/api/v1/runs", json=body).is_success
        samples = [{"name": "train.loss", "labels": {"run": run}, "step": i, "ts": T0 + i,
                    "value": 2.0 - 0.1 * i} for i in range(5)]  # fmt: skip
        doc = {"source": "trace-view", "seq": 1, "samples": samples}
        assert api.post("/api/v1/ingest", json=doc).is_success
        ids = []
        for rank, width in ((0, 64), (1, 256)):
            made = api.post(
                f"/api/v1/runs/{run}/profiles", params={"steps": 2, "first_step": 1, "rank": rank},
                content=gzip.compress(cpu_trace(home / f"rank{rank}.json", width).read_bytes()),
                headers={"Content-Type": "application/gzip"},
            )  # fmt: skip
            assert made.status_code == 201, made.text
            ids.append(made.json()["id"])
    return collector.url, run, ids


def test_a_trace_opens_from_the_run_and_a_second_rank_goes_beside_it(
    page: Page, profiled: tuple[str, str, list[str]]
) -> None:
    url, run, (rank0, rank1) = profiled
    dashboard = Dashboard(page, url)
    dashboard.open("overview", run=run)
    listed = page.locator("[data-profiles] tr[data-profile-id]")
    expect(listed).to_have_count(2)
    row = page.locator(f'[data-profiles] tr[data-profile-id="{rank0}"]')
    expect(row).to_contain_text("steps 1–2")
    row.locator('[data-action="open-profile"]').click()

    expect(page.locator('[data-view="trace"]')).to_be_visible()
    ops = page.locator(f'table[data-ops="{rank0}"]')
    expect(ops.locator('tr[data-op="aten::addmm"]')).to_have_count(1)
    expect(page.locator(f'[data-breakdown="{rank0}"]')).to_have_attribute("data-basis", "cpu")
    compute = page.locator(f'[data-breakdown="{rank0}"] .gp-bar [data-part="compute"]')
    assert float(compute.get_attribute("data-seconds") or 0) > 0
    timeline = page.locator(f'[data-timeline="{rank0}"][data-ready="1"]')
    expect(timeline).to_have_count(1)
    assert int(timeline.get_attribute("data-drawn") or 0) > 10
    assert timeline.evaluate(_INKED) > 1000

    # the step's own span is the first lane of the first row: hover names it
    box = timeline.locator("canvas").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 22 + 16 + 6)
    tip = timeline.locator("[data-timeline-tip]")
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("ProfilerStep#")
    expect(tip).to_contain_text(re.compile(r"\d[\d.,]* (µs|ms|s) · at"))  # its duration

    # sorted by self time, largest first; a click on the head turns it round
    self_head = ops.locator('th[data-sort="self_us"]')
    expect(self_head).to_have_attribute("aria-sort", "descending")
    top = ops.locator("tbody tr").first.get_attribute("data-op")
    self_head.click()
    expect(ops.locator('th[data-sort="self_us"]')).to_have_attribute("aria-sort", "ascending")
    assert ops.locator("tbody tr").first.get_attribute("data-op") != top

    page.select_option('[data-pick="vs"]', rank1)
    expect(page.locator('[data-traces="2"]')).to_be_visible()
    expect(page.locator('[data-timeline][data-ready="1"]')).to_have_count(2)
    second = page.locator(f'[data-timeline="{rank1}"][data-ready="1"]')
    assert second.evaluate(_INKED) > 1000
    expect(page.locator(f'table[data-ops="{rank1}"] tr[data-op="aten::addmm"]')).to_have_count(1)
    first, other = (page.locator(f'[data-timeline="{p}"]') for p in (rank0, rank1))
    assert first.get_attribute("data-end") == other.get_attribute("data-end")  # one time scale
    assert "vs=" + rank1 in page.url

    link = page.locator(f'[data-trace="{rank1}"] [data-action="download-profile"]')
    got = page.request.get(url + (link.get_attribute("href") or ""))
    assert got.status == 200 and got.headers["content-type"] == "application/gzip"
    assert got.body()[:2] == b"\x1f\x8b" and b"ProfilerStep#" in gzip.decompress(got.body())


def test_the_traces_view_lists_the_run_s_traces(
    page: Page, profiled: tuple[str, str, list[str]]
) -> None:
    url, run, ids = profiled
    root = Dashboard(page, url).open("trace", run=run)
    expect(root.locator("[data-profiles] tr[data-profile-id]")).to_have_count(2)
    root.locator(f'tr[data-profile-id="{ids[1]}"] td').first.click()
    expect(page.locator(f'[data-timeline="{ids[1]}"][data-ready="1"]')).to_have_count(1)
    assert f"profile={ids[1]}" in page.url
