"""Fixtures of the dashboard tests: Chromium driven by Playwright, and a live demo to look at.

Every test that uses ``page`` fails on any console error or uncaught page
error, and leaves a screenshot under ``test-artifacts/screenshots/`` (kept
when the test fails, which is when it matters most).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Error,
    Locator,
    Page,
    ViewportSize,
    expect,
    sync_playwright,
)

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
VIEWPORT: ViewportSize = {"width": 1440, "height": 900}
READY_TIMEOUT_S = 90.0
EXPECT_TIMEOUT_MS = 15_000
ACTION_TIMEOUT_MS = 30_000
#: Steps the demo must have stored before the dashboard is worth looking at.
MIN_STEPS = 20

_ERRORS = pytest.StashKey[list[str]]()
_SAVED = pytest.StashKey[list[Path]]()


@dataclass
class LiveDemo:
    """``stepwatch demo`` as a child process: its collector's URL and the run it streams."""

    url: str
    run_id: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def api(self, path: str, **params: Any) -> Any:
        """GET ``/api/v1/PATH`` as JSON."""
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        response.raise_for_status()
        return response.json()

    def run(self) -> dict[str, Any]:
        """The demo's run as the API returns it now."""
        return dict(self.api(f"runs/{self.run_id}"))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _banner(log_path: Path, proc: subprocess.Popen[bytes]) -> tuple[str, str]:
    """The collector URL and run id the demo prints when it starts."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        url = re.search(r"open (http://[^/\s]+)/\S* ", text)
        run = re.search(r"simulating run (\S+):", text)
        if url and run:
            return url.group(1), run.group(1)
        time.sleep(0.05)
    raise RuntimeError(f"the demo did not start:\n{log_path.read_text(errors='replace')}")


def _has_data(demo: LiveDemo) -> bool:
    """True once the run has training steps and GPU readings stored."""
    try:
        loss = demo.api("query/latest", name="train.loss", run=demo.run_id)
        gpus = demo.api("query/latest", name="gpu.util_pct", run=demo.run_id)
    except httpx.HTTPError:
        return False
    return bool(gpus) and any((row["step"] or 0) >= MIN_STEPS for row in loss)


@pytest.fixture(scope="session")
def live_demo(tmp_path_factory: pytest.TempPathFactory, session_processes: Any) -> LiveDemo:
    """A small ``stepwatch demo`` (2 nodes x 2 GPUs, fast steps) on a free port and a temp store,
    returned once its run has steps and GPU metrics stored; stopped at the end of the session
    (SIGTERM: the demo finishes its run and stops its collector)."""
    return _demo(session_processes, tmp_path_factory.mktemp("demo"))


#: When the faults of ``fault_demo`` begin, in seconds of the demo: late enough for a test to
#: open its pages first on a loaded machine (the demo is ready after about 5 s).
FAULT_AT_S = 40
#: The faults of ``fault_demo``: a log line that fires ``log_oom`` on node1 (open to the end)
#: and a non-finite loss for 10 s (``nonfinite``, resolved afterwards).
FAULTS = (f"log_oom@{FAULT_AT_S}:node1", f"nonfinite@{FAULT_AT_S}+10")


@pytest.fixture(scope="session")
def fault_demo(tmp_path_factory: pytest.TempPathFactory, session_processes: Any) -> LiveDemo:
    """A second small demo whose ``FAULTS`` fire ``FAULT_AT_S`` seconds after it started."""
    faults = [arg for fault in FAULTS for arg in ("--fault", fault)]
    return _demo(session_processes, tmp_path_factory.mktemp("fault-demo"), faults)


def wait_for_alert(
    demo: LiveDemo, kind: str, timeout_s: float = READY_TIMEOUT_S + FAULT_AT_S
) -> dict[str, Any]:
    """The demo run's alert of ``kind`` (as ``GET /api/v1/alerts`` has it) once it fired."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = alerts_of(demo, kind)
        if found:
            return found[0]
        if demo.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {kind} alert in time:\n{demo.log()}")
        time.sleep(0.5)


def alerts_of(demo: LiveDemo, kind: str) -> list[dict[str, Any]]:
    """Every alert of ``kind`` of the demo run, any state."""
    found = demo.api("alerts", run=demo.run_id, state="all", kind=kind)
    return list(found)


def _demo(processes: Any, home: Path, extra: list[str] | None = None) -> LiveDemo:
    """Start ``stepwatch demo`` in ``home`` with ``processes``; see ``live_demo``."""
    args = ["--port", "0", "--store", str(home / "demo.duckdb"), "--nodes", "2", "--gpus", "2"]
    args += ["--step-interval", "0.1", *(extra or [])]
    log_path = home / "demo.log"
    proc = processes.start([sys.executable, "-m", "stepwatch.cli", "demo", *args], log_path)
    url, run_id = _banner(log_path, proc)
    demo = LiveDemo(url, run_id, proc, log_path)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _has_data(demo):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the demo stored no steps in time:\n{demo.log()}")
        time.sleep(0.2)
    return demo


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, through Playwright (its driver ships with the package)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is not installed: run scripts/system-deps")
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)  # a loaded test machine draws slowly
    for stale in SCREENSHOTS.glob("*.png"):  # the folder shows this session's tests only
        stale.unlink()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page_errors(request: pytest.FixtureRequest) -> list[str]:
    """Console errors and uncaught exceptions of ``page`` so far; a test that expects some
    removes them, any left fail the test."""
    errors: list[str] = []
    request.node.stash[_ERRORS] = errors
    return errors


@pytest.fixture
def page(
    browser: Browser, page_errors: list[str], request: pytest.FixtureRequest
) -> Iterator[Page]:
    """A fresh page in its own context; screenshotted at teardown, pass or fail."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    tab = context.new_page()
    watch(tab, page_errors)
    try:
        yield tab
    finally:
        _screenshot(tab, request)
        context.close()


@dataclass
class Dashboard:
    """The dashboard of a collector in ``page``: views by hash route (``#/VIEW?run=ID``), with
    ``data-view`` roots and ``data-chart`` panels that say ``data-ready="1"`` once drawn."""

    page: Page
    url: str

    def open(self, view: str, **params: str) -> Locator:
        """Go to a view; its root element (``[data-view=VIEW]``)."""
        query = f"?{urlencode(params)}" if params else ""
        self.page.goto(f"{self.url}/#/{view}{query}")
        return self.page.locator(f'[data-view="{view}"]')

    def sign_in(self, token: str, who: str) -> None:
        """Sign in with ``token`` on the form the page shows; ``who`` is what the header then
        says (name · role)."""
        expect(self.page.locator("[data-signin]")).to_be_visible()
        self.page.locator("#signin-token").fill(token)
        self.page.locator("[data-signin] button[type=submit]").click()
        expect(self.page.locator("[data-signin]")).to_be_hidden()
        expect(self.page.locator("#who")).to_contain_text(who)

    def chart(self, name: str, min_points: int = 1) -> Locator:
        """The chart ``name`` once drawn with at least ``min_points`` points."""
        chart = self.page.locator(f'[data-chart="{name}"][data-ready="1"]')
        expect(chart).to_have_count(1)
        points = int(chart.get_attribute("data-points") or 0)
        assert points >= min_points, f"chart {name} drew {points} points"
        return chart


@pytest.fixture
def dashboard(page: Page, live_demo: LiveDemo) -> Dashboard:
    """The live demo's dashboard in a fresh page."""
    return Dashboard(page, live_demo.url)


@pytest.fixture
def fault_dashboard(page: Page, fault_demo: LiveDemo) -> Dashboard:
    """The fault demo's dashboard in a fresh page."""
    return Dashboard(page, fault_demo.url)


def watch(tab: Page, errors: list[str]) -> None:
    """Collect the console errors and uncaught exceptions of ``tab`` into ``errors``."""
    tab.on("console", lambda msg: _on_console(msg, errors))
    tab.on("pageerror", lambda exc: errors.append(f"uncaught {exc.name}: {exc.message}"))


def _on_console(message: ConsoleMessage, errors: list[str]) -> None:
    if message.type == "error":
        where = message.location
        errors.append(f"console.error {message.text} ({where['url']}:{where['lineNumber']})")


def screenshot_path(nodeid: str) -> Path:
    """Where the screenshot of the test ``nodeid`` goes: one file a test, named after it."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.removeprefix("tests/ui/")).strip("_")
    return SCREENSHOTS / f"{name}.png"


def _screenshot(tab: Page, request: pytest.FixtureRequest, suffix: str = "") -> None:
    path = screenshot_path(request.node.nodeid + suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        image = tab.screenshot(full_page=True)  # with path=, Playwright writes from a new thread
    except Error as exc:  # a crashed page: the test reports why, the screenshot is only a loss
        print(f"no screenshot for {request.node.nodeid}: {exc.message}")
        return
    path.write_bytes(image)
    print(f"screenshot: {path}")
    request.config.stash.setdefault(_SAVED, []).append(path)


def screenshot(tab: Page, request: pytest.FixtureRequest, suffix: str) -> None:
    """Keep a screenshot of a second tab of a test, named after the test and ``suffix``."""
    _screenshot(tab, request, "-" + suffix)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test that passed still fails when its page logged errors, and says which."""
    result = yield
    errors = item.stash.get(_ERRORS, [])
    if errors:
        pytest.fail("the page logged errors:\n" + "\n".join(errors), pytrace=False)
    return result


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    saved = config.stash.get(_SAVED, [])
    if saved:
        terminalreporter.write_sep("-", f"{len(saved)} screenshots in {SCREENSHOTS}")
        for path in saved:
            terminalreporter.write_line(str(path))
