"""The incidents view: a run's out-of-memory log line and the NaN loss after it are one
incident with the OOM as its root cause; another run's NaN loss is an incident of its own,
listed first (newer); a card's link opens its run, and one run's incidents are shown alone.
A collector without playbooks or an analyst shows neither; asking its model says why it
cannot and takes the ask buttons away (with both: test_incident_analysis_view.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from .conftest import Dashboard

WAIT_S = 20.0
OOM = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"


def loss_doc(seq: int, run: str, values: list[float | str], t0: float) -> dict[str, Any]:
    """An ingest document of a run's ``loss``: step i at ``t0 + i`` (``"NaN"`` for NaN)."""
    samples = [
        {"name": "loss", "labels": {"run": run}, "step": i, "ts": t0 + i, "value": v}
        for i, v in enumerate(values)
    ]
    return {"source": f"trainer-{run}", "seq": seq, "samples": samples}


@pytest.fixture(scope="module")
def incidents(module_collector_factory: Any) -> tuple[str, float]:
    """A collector where run ``oom-run`` logged an OOM on node0 and then a NaN loss, and run
    ``nan-run`` an hour later only a NaN loss; returned once both incidents are listed."""
    collector = module_collector_factory()
    t0 = time.time() - 7200
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
        for run, start in (("oom-run", t0), ("nan-run", t0 + 3600)):
            body = {"id": run, "project": "ui-tests", "name": run, "start": start}
            assert api.post("/api/v1/runs", json=body).is_success
        labels = {"run": "oom-run", "node": "node0"}
        oom = {"ts": t0 + 1, "kind": "log", "text": OOM, "labels": labels}
        doc = {"source": "logs-n0", "seq": 1, "events": [oom]}
        assert api.post("/api/v1/ingest", json=doc).is_success
        docs = [
            loss_doc(1, "oom-run", [1.0, 1.0, 1.0, "NaN"], t0),
            loss_doc(2, "nan-run", [1.0, "NaN"], t0 + 3600),
        ]
        for doc in docs:
            assert api.post("/api/v1/ingest", json=doc).is_success
        pause = threading.Event()
        deadline = time.monotonic() + WAIT_S
        while True:
            listed = api.get("/api/v1/alerts/incidents").json()
            if [len(i["alerts"]) for i in listed] == [1, 2]:
                break
            assert time.monotonic() < deadline, f"the incidents did not form: {listed}"
            pause.wait(0.1)
    return collector.url, t0


def test_incidents_newest_first_with_the_oom_as_root_cause(
    page: Page, incidents: tuple[str, float]
) -> None:
    url, _ = incidents
    dashboard = Dashboard(page, url)
    view = dashboard.open("incidents")
    expect(page.locator('[data-nav="incidents"]')).to_have_class("active")
    cards = view.locator("[data-incident]")
    expect(cards).to_have_count(2)
    assert [cards.nth(i).get_attribute("data-run") for i in range(2)] == ["nan-run", "oom-run"]

    card = view.locator('[data-incident][data-run="oom-run"]')
    expect(card).to_have_attribute("data-open", "1")
    expect(card.locator('[data-field="state"]')).to_have_text("open")
    root = card.locator("[data-root-cause]")
    expect(root).to_have_attribute("data-root-cause", "log_oom")
    expect(root).to_contain_text("node=node0")
    expect(root.locator("[data-evidence]").filter(has_text="may explain nonfinite")).to_have_count(
        1
    )
    expect(card.locator('[data-cause="nonfinite"]')).to_have_count(1)
    timeline = card.locator("[data-incident-alert]")
    expect(timeline).to_have_count(2)
    assert [timeline.nth(i).get_attribute("data-kind") for i in range(2)] == [
        "log_oom",
        "nonfinite",
    ]
    other = view.locator('[data-incident][data-run="nan-run"]')
    expect(other.locator("[data-root-cause]")).to_have_attribute("data-root-cause", "nonfinite")

    card.locator('[data-action="open-run"]').click()
    expect(page.locator('[data-view="overview"]')).to_be_visible()
    assert "run=oom-run" in page.url
    link = page.locator('[data-view="overview"] [data-action="incidents"]')
    expect(link).to_be_visible()
    link.click()
    expect(page.locator('[data-view="incidents"] [data-incident]')).to_have_count(1)


def test_one_runs_incidents_and_the_open_filter(page: Page, incidents: tuple[str, float]) -> None:
    url, _ = incidents
    view = Dashboard(page, url).open("incidents", run="nan-run", state="open")
    cards = view.locator("[data-incident]")
    expect(cards).to_have_count(1)
    expect(cards).to_have_attribute("data-run", "nan-run")
    expect(view.locator('[data-filter="state"]')).to_have_value("open")
    view.locator('[data-action="all-runs"]').click()
    expect(page.locator('[data-view="incidents"] [data-incident]')).to_have_count(2)


def test_without_an_analyst_asking_the_model_says_why_and_the_asks_go(
    page: Page, incidents: tuple[str, float], page_errors: list[str]
) -> None:
    url, _ = incidents
    view = Dashboard(page, url).open("incidents")
    card = view.locator('[data-incident][data-run="oom-run"]')
    expect(card.locator("[data-root-cause]")).to_have_count(1)
    expect(view.locator("[data-playbook]")).to_have_count(0)  # no playbooks configured
    expect(view.locator("[data-analysis]")).to_have_count(0)
    asks = view.locator('[data-action="ask-model"]')
    expect(asks).to_have_count(2)  # auth off: the page may operate
    expect(asks.first).to_have_text("Ask the model")
    with (
        page.expect_console_message(lambda m: "409" in m.text),
        page.expect_response(lambda r: r.request.method == "POST") as answered,
    ):
        card.locator('[data-action="ask-model"]').click()
    assert answered.value.url.endswith(
        f"/alerts/incidents/{card.get_attribute('data-incident')}/analysis"
    )
    assert answered.value.status == 409
    expect(page.locator("#message")).to_have_text(
        "this collector has no analyst: start it with --analyst URL"
    )
    expect(asks).to_have_count(0)
    # the refusal the browser logs is what this test is about; any other error still fails it
    page_errors[:] = [e for e in page_errors if "status of 409" not in e]
