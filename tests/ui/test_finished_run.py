"""A run that has ended is not live: its range ends where the run ended, the range says no
"live" and the live dot says the run has ended, also when it ends while the page shows it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Dashboard, LiveDemo

#: Logs 60 steps (3 s) through the SDK, says its run id, and finishes the run on a line of stdin.
_RUN = """
    import math, sys, time
    import stepwatch.sdk as sw
    run = sw.init(project="ui-tests", name="ends-while-watched", server=sys.argv[1],
                  dir=sys.argv[2], flush_interval_s=0.2, heartbeat_s=None)
    for step in range(60):
        sw.log({"train.loss": 5.0 * math.exp(-step / 30) + 1.0}, step=step)
        time.sleep(0.05)
    print(run.id, flush=True)
    sys.stdin.readline()
    sw.finish()
"""
#: True once the loss chart is drawn for a range that ends at the given time.
_ENDS_AT = """end => {
    const c = document.querySelector('[data-chart="train.loss"]');
    return c && c.dataset.ready === "1" && Number(c.dataset.end) === end;
}"""
#: Longer than the page's wait between two readings of a running run's status (15 s).
ENDED_SEEN_MS = 40_000


class Training:
    """The SDK run of ``_RUN`` in a child process, finished on demand."""

    def __init__(self, demo: LiveDemo, spool: Path) -> None:
        self.demo = demo
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_RUN), demo.url, str(spool)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.run_id = self.proc.stdout.readline().strip()
        self._wait(lambda run: (run.get("step") or 0) >= 59, "its steps")

    def summary(self) -> dict[str, Any]:
        (run,) = [r for r in self.demo.api("runs/summary") if r["id"] == self.run_id]
        return dict(run)

    def finish(self) -> dict[str, Any]:
        """Finish the run (once); its summary once the collector has it finished."""
        if self.proc.returncode is None:
            self.proc.communicate("\n", timeout=60)  # and closes the pipes
            assert self.proc.returncode == 0
        return self._wait(lambda run: run["status"] == "finished", "the end of the run")

    def _wait(self, done: Any, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            run = self.summary() if self.run_id else {}
            if run and done(run):
                return run
            time.sleep(0.2)
        raise AssertionError(f"the collector did not get {what} of {self.run_id!r}")


@pytest.fixture(scope="module")
def training(live_demo: LiveDemo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Training]:
    """A run of 60 steps next to the live demo's, running until a test finishes it."""
    t = Training(live_demo, tmp_path_factory.mktemp("spool"))
    yield t
    t.finish()


def test_a_run_that_ends_while_watched_stops_being_live(
    dashboard: Dashboard, training: Training
) -> None:
    page = dashboard.page
    dashboard.open("overview", run=training.run_id)
    dashboard.chart("train.loss", min_points=2)
    expect(page.locator("[data-range]")).to_contain_text("now (live)")
    expect(page.locator("#live")).to_have_class("live on")

    ended = training.finish()
    expect(page.locator("[data-range]")).not_to_contain_text("live", timeout=ENDED_SEEN_MS)
    expect(page.locator("#live")).to_have_class("live ended")
    page.wait_for_function(_ENDS_AT, arg=ended["end"])  # drawn again, up to the end


@pytest.mark.parametrize("view", ["overview", "hardware", "steptime", "heatmap", "alerts"])
def test_a_finished_run_is_shown_to_its_end(
    dashboard: Dashboard, training: Training, view: str
) -> None:
    ended = training.finish()
    page = dashboard.page
    dashboard.open(view, run=training.run_id)
    expect(page.locator("#live")).to_have_class("live ended")
    expect(page.locator("#live")).to_have_attribute("title", "this run has ended: no live updates")
    if view != "alerts":
        expect(page.locator("[data-range]")).not_to_contain_text("live")
    if view == "overview":
        dashboard.chart("train.loss", min_points=2)
        page.wait_for_function(_ENDS_AT, arg=ended["end"])
