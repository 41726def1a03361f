"""Signing in to the dashboard of a collector with auth: a token once, then an HttpOnly,
SameSite=Strict session cookie; a viewer is offered no control that changes anything, an
operator acknowledges and silences from the page, and a 401 later brings the form back."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from conftest import Collector, CollectorFactory, poll
from playwright.sync_api import Page, expect

from .conftest import Dashboard

RUN = "signin-run"
#: Losses of the run: the NaN fires ``nonfinite_loss``, an alert to acknowledge and silence.
LOSSES: list[float | str] = [2.0, 1.9, 1.8, 1.7, "NaN", 1.6, 1.5]
#: How the browser logs an answer 401 (as a console error, whatever the page does with it).
REFUSED = re.compile(r"Failed to load resource: .* status of 401 .*\(http://[^/]+(/[^\s:?]+)")

#: Open an EventSource on a path; "open" once the collector streams, "refused" on an error.
EVENT_SOURCE = """(path) => new Promise((resolve) => {
  const source = new EventSource(path);
  source.onopen = () => { source.close(); resolve("open"); };
  source.onerror = () => { source.close(); resolve("refused"); };
})"""


def _refused(page_errors: list[str]) -> set[str]:
    """The paths the collector answered 401 to, taken out of the page's errors: those refusals
    are what the test is about; any other error still fails it."""
    paths = {m.group(1) for e in page_errors if (m := REFUSED.search(e))}
    page_errors[:] = [e for e in page_errors if not REFUSED.search(e)]
    return paths


def _admin(collector: Collector, method: str, path: str, **kwargs: Any) -> Any:
    response = httpx.request(
        method, f"{collector.url}/api/v1/{path}", headers=collector.headers, timeout=10, **kwargs
    )
    response.raise_for_status()
    return response.json()


def _feed(collector: Collector) -> None:
    """A run of project ``default`` with a loss, sent as its training node would."""
    node = collector.headers_of("ingest")
    t0 = time.time() - 60
    run = {"id": RUN, "project": "default", "name": "signin", "start": t0}
    samples = [
        {"name": "train.loss", "labels": {"run": RUN}, "step": i, "ts": t0 + i, "value": v}
        for i, v in enumerate(LOSSES)
    ]
    doc = {"source": "trainer-signin", "seq": 1, "samples": samples}
    for path, body in (("runs", run), ("ingest", doc)):
        httpx.post(f"{collector.url}/api/v1/{path}", json=body, headers=node).raise_for_status()


def _alert(collector: Collector) -> dict[str, Any]:
    """The run's nonfinite alert as the API has it now."""
    alerts = _admin(collector, "GET", "alerts", params={"run": RUN, "state": "all"})
    (found,) = [a for a in alerts if a["kind"] == "nonfinite"]
    return dict(found)


@pytest.fixture(scope="module")
def guarded(module_collector_factory: CollectorFactory) -> Collector:
    """A collector with auth on, tokens of every role, and the run with its alert fired."""
    collector = module_collector_factory(auth=True)
    _feed(collector)
    poll(lambda: [a for a in _admin(collector, "GET", "alerts") if a["kind"] == "nonfinite"])
    return collector


def _sign_in(page: Page, collector: Collector, token: str, who: str, **params: str) -> Dashboard:
    """Open a view (default: the run's alerts), meet the form, sign in with ``token``."""
    board = Dashboard(page, collector.url)
    view = board.open(params.pop("view", "alerts"), run=RUN, **params)
    expect(page.locator("[data-signin]")).to_be_visible()
    expect(view).to_have_count(0)
    board.sign_in(token, who)
    return board


def test_a_viewer_reads_the_run_is_offered_no_control_and_signs_out(
    page: Page, guarded: Collector, page_errors: list[str]
) -> None:
    token = guarded.tokens["viewer", "default"]
    board = _sign_in(page, guarded, token, "viewer-default · viewer", view="overview")
    board.chart("train.loss", min_points=len(LOSSES) - 1)
    expect(page.locator("#live")).to_have_class(re.compile(r"\bon\b"))  # the stream, by cookie
    assert page.evaluate(EVENT_SOURCE, "/api/v1/alerts/stream") == "open"
    alert = _alert(guarded)
    board.open("alerts", run=RUN, alert=alert["id"])
    details = page.locator("[data-alert-details]")
    expect(details).to_contain_text("need the operator role")
    for action in ("ack", "silence", "unsilence"):
        expect(page.locator(f'[data-action="{action}"]')).to_have_count(0)
    stored = page.evaluate("JSON.stringify([localStorage, sessionStorage]) + document.cookie")
    assert token not in stored and "stepwatch_session" not in stored

    page.locator('[data-action="sign-out"]').click()
    expect(page.locator("[data-signin]")).to_be_visible()
    expect(page.locator("#who")).to_be_hidden()
    expect(page.locator("#view")).to_be_empty()
    with page.expect_console_message(lambda m: "401" in m.text):
        status = page.evaluate("fetch('/api/v1/runs/summary').then((r) => r.status)")
    assert status == 401
    assert _refused(page_errors) == {"/api/v1/session", "/api/v1/runs/summary"}


def test_an_operator_acknowledges_and_silences_after_a_reload(
    page: Page, guarded: Collector, page_errors: list[str]
) -> None:
    alert = _alert(guarded)
    token = guarded.tokens["operator", "default"]
    _sign_in(page, guarded, token, "operator-default · operator", alert=alert["id"])
    (cookie,) = page.context.cookies()
    assert cookie["name"] == "stepwatch_session"
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""

    page.reload()  # the CSRF secret was in memory only: the collector gives it again
    expect(page.locator("#who")).to_contain_text("operator")
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/ack")) as sent:
        page.locator('[data-action="ack"]').click()
    headers = sent.value.headers
    assert headers.get("x-csrf-token") and "authorization" not in headers
    expect(page.locator(f'[data-alert-id="{alert["id"]}"]')).to_contain_text("acked")
    assert _alert(guarded)["acked"] is True

    page.locator('[data-action="silence"]').click()
    expect(page.locator("[data-silence-id]", has_text="kind=nonfinite")).to_have_count(1)
    silences = _admin(guarded, "GET", "silences")
    assert len([s for s in silences if "kind=nonfinite" in s["matchers"]]) == 1
    assert _refused(page_errors) == {"/api/v1/session"}  # before sign-in only


def test_a_revoked_token_brings_the_form_back(
    page: Page, guarded: Collector, page_errors: list[str]
) -> None:
    made = _admin(guarded, "POST", "tokens", json={"role": "viewer", "projects": ["default"]})
    board = _sign_in(page, guarded, made["token"], made["name"], view="runs")
    expect(page.locator(f'[data-run-id="{RUN}"]')).to_have_count(1)
    _admin(guarded, "DELETE", f"tokens/{made['id']}")
    _refused(page_errors)
    with page.expect_console_message(lambda m: "401" in m.text):
        board.open("alerts", run=RUN)
    expect(page.locator("[data-signin]")).to_be_visible()
    expect(page.locator("#view")).to_be_empty()
    asked = {"/api/v1/runs/summary", "/api/v1/alerts", "/api/v1/alerts/stream", "/openapi.json"}
    asked.add("/api/v1/stream")
    assert _refused(page_errors) <= asked


def test_a_wrong_token_is_said_in_the_form(
    page: Page, guarded: Collector, page_errors: list[str]
) -> None:
    Dashboard(page, guarded.url).open("runs")
    page.locator("#signin-token").fill("sw_not-a-token")
    page.locator("[data-signin] button[type=submit]").click()
    expect(page.locator("[data-signin-error]")).to_contain_text("Not signed in")
    expect(page.locator("#signin-token")).to_have_value("")
    expect(page.locator("[data-signin]")).to_be_visible()
    expect(page.locator('[data-view="runs"]')).to_have_count(0)
    assert _refused(page_errors) == {"/api/v1/session"}  # GET (no session yet), POST


def test_an_ingest_token_opens_no_page(
    page: Page, guarded: Collector, page_errors: list[str]
) -> None:
    Dashboard(page, guarded.url).open("runs")
    page.locator("#signin-token").fill(guarded.tokens["ingest", "default"])
    page.locator("[data-signin] button[type=submit]").click()
    expect(page.locator("[data-signin-error]")).to_contain_text("has role ingest")
    expect(page.locator("#who")).to_be_hidden()
    with page.expect_console_message(lambda m: "401" in m.text):
        status = page.evaluate("fetch('/api/v1/session').then((r) => r.status)")
    assert status == 401  # the session it opened is closed
    assert _refused(page_errors) == {"/api/v1/session"}


def test_without_auth_nobody_signs_in_or_out(dashboard: Dashboard) -> None:
    expect(dashboard.open("runs")).to_be_visible()
    expect(dashboard.page.locator("[data-row]").first).to_be_visible()
    expect(dashboard.page.locator("[data-signin]")).to_be_hidden()
    expect(dashboard.page.locator("#who")).to_be_hidden()
