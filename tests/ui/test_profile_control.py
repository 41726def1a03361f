"""Profiles on demand from the run's page: an operator asks a running run (two ranks of a real
CPU training under ``stepwatch.torch.control``) for a profile of one rank; the control says
the command is pending until the run takes it, then done once that rank's trace is in the
list. A viewer is offered no such control, and the collector refuses one anyway."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest
import torch
from conftest import Collector, CollectorFactory, poll
from playwright.sync_api import Page, expect

import stepwatch
from stepwatch.torch import Control, control

from .conftest import Dashboard

RUN = "profiled-from-page"
#: How long a trace may take: two steps of warm-up, two profiled, then written and uploaded.
TRACE_TIMEOUT_MS = 60_000


@dataclass
class Job:
    """Ranks 0 and 1 of one run, each a small model's training under ``control()``; they step
    only inside ``training()``, so a command waits for the run until then."""

    runs: list[stepwatch.Run]
    controls: list[Control] = field(default_factory=list)

    def __post_init__(self) -> None:
        torch.manual_seed(0)
        self._models = [torch.nn.Linear(16, 1) for _ in self.runs]
        optimizers = [torch.optim.SGD(m.parameters(), lr=0.01) for m in self._models]
        self._optimizers = optimizers
        self.controls = [
            control(run, optimizer=opt, interval_s=0.05)
            for run, opt in zip(self.runs, optimizers, strict=True)
        ]
        self._x, self._y = torch.randn(8, 16), torch.randn(8, 1)

    def _train(self, stop: threading.Event) -> None:
        step = 0
        while not stop.is_set():
            for run, model, opt in zip(self.runs, self._models, self._optimizers, strict=True):
                with run.step(step):
                    opt.zero_grad()
                    torch.nn.functional.mse_loss(model(self._x), self._y).backward()
                    opt.step()
            step += 1

    @contextmanager
    def training(self) -> Iterator[None]:
        """The ranks step (on a thread of their own) while in the block."""
        stop = threading.Event()
        thread = threading.Thread(target=self._train, args=(stop,), name="ui-test-training")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def close(self) -> None:
        for ctl, run in zip(self.controls, self.runs, strict=True):
            ctl.close()
            run.finish()


@pytest.fixture(scope="module")
def guarded(module_collector_factory: CollectorFactory) -> Collector:
    """A collector with auth on and tokens of every role."""
    collector: Collector = module_collector_factory(auth=True)
    return collector


@pytest.fixture(scope="module")
def job(guarded: Collector, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    """The run's two ranks, known to the collector as running; not stepping yet."""
    home = tmp_path_factory.mktemp("ranks")
    token = guarded.tokens["ingest", "default"]
    runs = [
        stepwatch.Run(project="default", run_id=RUN, server=guarded.url, token=token,
                      dir=home / f"rank{rank}", labels={"rank": rank}, flush_interval_s=0.1,
                      heartbeat_s=None)
        for rank in (0, 1)
    ]  # fmt: skip
    started = Job(runs)
    url = f"{guarded.url}/api/v1/runs/{RUN}"
    known = poll(lambda: httpx.get(url, headers=guarded.headers, timeout=10).is_success)
    assert known, "the run never reached the collector"
    yield started
    started.close()


def _sign_in(page: Page, page_errors: list[str], guarded: Collector, role: str) -> None:
    """Open the run's overview and sign in as ``role``; the 401 the page met before is what
    sends it to the form, not an error."""
    board = Dashboard(page, guarded.url)
    board.open("overview", run=RUN)
    board.sign_in(guarded.tokens[role, "default"], f"{role}-default · {role}")
    page_errors[:] = [e for e in page_errors if "401" not in e or "/api/v1/session" not in e]


def test_an_operator_profiles_one_rank_from_the_run_s_page(
    page: Page, page_errors: list[str], guarded: Collector, job: Job
) -> None:
    _sign_in(page, page_errors, guarded, "operator")
    panel = page.locator("[data-profiles]")
    expect(panel).to_contain_text("No profiler traces of this run")
    panel.locator('[data-field="profile-steps"]').fill("2")
    panel.locator('[data-field="profile-ranks"]').fill("1")
    panel.locator('[data-action="profile"]').click()
    state = panel.locator("[data-profile-command]")
    expect(state).to_have_attribute("data-status", "pending")  # the run is not stepping yet

    with job.training():
        expect(state).to_have_attribute("data-status", "done", timeout=TRACE_TIMEOUT_MS)
    rows = panel.locator("tr[data-profile-id]")
    expect(rows).to_have_count(1)
    expect(rows.locator("td").first).to_have_text("1")
    expect(rows).to_contain_text("steps ")
    assert [len(ctl.profiles) for ctl in job.controls] == [0, 1]  # rank 0 went on unprofiled
    url = f"{guarded.url}/api/v1/runs/{RUN}/commands"
    commands = httpx.get(url, headers=guarded.headers, timeout=10)
    (command,) = commands.json()
    assert (command["action"], command["ranks"], command["status"]) == ("profile", [1], "ok")
    assert command["by"].startswith("operator-default")


def test_a_viewer_is_offered_no_profile_control_and_is_refused_one(
    page: Page, page_errors: list[str], guarded: Collector, job: Job
) -> None:
    _sign_in(page, page_errors, guarded, "viewer")
    expect(page.locator("[data-profiles] h3")).to_be_visible()
    expect(page.locator("[data-profile-control]")).to_have_count(0)
    refused = httpx.post(
        f"{guarded.url}/api/v1/runs/{RUN}/commands", json={"action": "profile", "ranks": [1]},
        headers=guarded.headers_of("viewer"), timeout=10,
    )  # fmt: skip
    assert refused.status_code == 403
