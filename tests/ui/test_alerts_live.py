"""Alerts in the dashboard of a demo with faults: they arrive live (list and chart markers, no
reload), and a person acknowledges or silences them from the page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import (
    FAULT_AT_S,
    Dashboard,
    LiveDemo,
    alerts_of,
    screenshot,
    wait_for_alert,
    watch,
)

#: Long enough for a fault to fire on a loaded machine, from when the page opened.
FIRE_TIMEOUT_MS = (FAULT_AT_S + 90) * 1000


def test_an_alert_arrives_live_in_the_list_and_on_the_charts(
    fault_dashboard: Dashboard,
    fault_demo: LiveDemo,
    page_errors: list[str],
    request: pytest.FixtureRequest,
) -> None:
    run = fault_demo.run_id
    fault_dashboard.open("overview", run=run)
    loss = fault_dashboard.chart("train.loss")
    alerts_tab = fault_dashboard.page.context.new_page()
    watch(alerts_tab, page_errors)
    alerts_view = Dashboard(alerts_tab, fault_demo.url)
    expect(alerts_view.open("alerts", run=run)).to_be_visible()
    assert not alerts_of(fault_demo, "log_oom"), "the fault fired before the pages opened"
    for tab in (fault_dashboard.page, alerts_tab):  # a reload would lose this mark
        tab.evaluate("window.stepwatchTestMark = 1")
    expect(loss).to_have_attribute("data-annotations", "0")

    row = alerts_tab.locator("[data-alert-id]", has_text="log_oom")
    expect(row).to_have_count(1, timeout=FIRE_TIMEOUT_MS)
    expect(row).to_contain_text("node=node1")
    expect(row).to_contain_text("firing")
    expect(alerts_tab.locator('[data-chart="alerts.timeline"] .mark').first).to_be_visible()
    expect(loss).to_have_attribute("data-annotations", re.compile(r"^[1-9]"), timeout=30_000)

    row.click()
    details = alerts_tab.locator("[data-alert-details]")
    expect(details).to_contain_text("Playbook")
    expect(details).to_contain_text(wait_for_alert(fault_demo, "log_oom")["playbook"])
    for tab in (fault_dashboard.page, alerts_tab):
        assert tab.evaluate("window.stepwatchTestMark") == 1
    screenshot(alerts_tab, request, "alerts")
    alerts_tab.close()


def test_silence_from_the_page_mutes_the_alert(
    fault_dashboard: Dashboard, fault_demo: LiveDemo
) -> None:
    alert = wait_for_alert(fault_demo, "log_oom")
    page = fault_dashboard.page
    fault_dashboard.open("alerts", run=fault_demo.run_id, alert=alert["id"])
    row = page.locator(f'[data-alert-id="{alert["id"]}"]')
    expect(row).not_to_contain_text("silenced")
    page.locator("[data-alert-details] input[aria-label=comment]").fill("known: node1 OOM")
    page.locator('[data-action="silence"]').click()

    expect(row).to_contain_text("silenced")
    silence = page.locator("[data-silence-id]", has_text="kind=log_oom")
    expect(silence).to_contain_text("node=node1")
    expect(silence).to_contain_text("known: node1 OOM")
    (muted,) = [a for a in alerts_of(fault_demo, "log_oom") if a["id"] == alert["id"]]
    assert muted["silenced"] is True
    listed = [s for s in fault_demo.api("silences") if "kind=log_oom" in s["matchers"]]
    assert len(listed) == 1 and "node=node1" in listed[0]["matchers"]
    assert listed[0]["comment"] == "known: node1 OOM"

    silence.locator('[data-action="unsilence"]').click()  # and lifted again from the page
    expect(silence).to_have_count(0)
    expect(row).not_to_contain_text("silenced")
    assert not [s for s in fault_demo.api("silences") if "kind=log_oom" in s["matchers"]]


def test_acknowledge_from_the_page(fault_dashboard: Dashboard, fault_demo: LiveDemo) -> None:
    alert = wait_for_alert(fault_demo, "nonfinite")
    assert alert["acked"] is False
    page = fault_dashboard.page
    fault_dashboard.open("alerts", run=fault_demo.run_id)
    row = page.locator(f'[data-alert-id="{alert["id"]}"]')
    row.click()
    expect(page.locator("[data-alert-details]")).to_contain_text("Playbook")
    page.locator("[data-alert-details] input[aria-label=comment]").fill("rolled back")
    page.locator('[data-action="ack"]').click()

    expect(row).to_contain_text("acked")
    expect(page.locator('[data-action="ack"]')).to_be_disabled()
    expect(page.locator('[data-action="ack"]')).to_have_text("Acknowledged")
    (acked,) = [a for a in alerts_of(fault_demo, "nonfinite") if a["id"] == alert["id"]]
    assert acked["acked"] is True


def test_logs_around_an_alert_mark_its_line(
    fault_dashboard: Dashboard, fault_demo: LiveDemo
) -> None:
    alert = wait_for_alert(fault_demo, "log_oom")
    page = fault_dashboard.page
    fault_dashboard.open("alerts", run=fault_demo.run_id, alert=alert["id"])
    page.locator("[data-alert-details] a", has_text="Logs around this time").click()

    expect(page.locator('[data-view="logs"]')).to_be_visible()
    expect(page).to_have_url(re.compile(r"#/logs\?.*at="))
    marked = page.locator("[data-logs] [data-row].hit")
    expect(marked).to_have_count(1)
    expect(marked).to_contain_text("OutOfMemoryError")
    expect(marked).to_contain_text("node1")
