"""Periodic: a job run every so often on one named thread, sooner when woken, at start and at
stop when the owner asks, on the schedule it asks for; a failure logged and the next run comes."""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

import pytest
from conftest import poll

from stepwatch._periodic import Periodic

log = logging.getLogger("stepwatch.test")
WAIT_S = 30.0


class Job:
    """Counts its runs and the threads they ran on; fails on the runs listed."""

    def __init__(self, fail_on: tuple[int, ...] = ()) -> None:
        self.runs, self.fail_on = 0, fail_on
        self.threads: set[str] = set()
        self.ran = threading.Event()

    def __call__(self) -> None:
        self.runs += 1
        self.threads.add(threading.current_thread().name)
        self.ran.set()
        if self.runs in self.fail_on:
            raise RuntimeError(f"run {self.runs} failed")


def periodic(job: Job, interval_s: float, **options: Any) -> Periodic:
    return Periodic(
        job, interval_s, name="stepwatch-tick", failed="a tick failed", log=log, **options
    )


def test_runs_every_interval_on_its_thread_until_stopped() -> None:
    job = Job()
    worker = periodic(job, 0.01)
    worker.start()
    assert poll(lambda: job.runs >= 3)
    worker.stop()
    runs = job.runs
    assert not worker.alive and job.threads == {"stepwatch-tick"}
    assert job.runs == runs  # nothing after the stop


def test_a_wake_runs_it_now_and_a_stop_ends_the_wait() -> None:
    job = Job()
    worker = periodic(job, math.inf)
    worker.start()
    worker.wake()
    assert job.ran.wait(WAIT_S)
    worker.stop()  # the wait for a tick that never comes ends
    assert job.runs == 1


def test_runs_at_start_and_at_stop_when_asked() -> None:
    job = Job()
    worker = periodic(job, math.inf, at_start=True, at_stop=True)
    worker.start()
    assert job.ran.wait(WAIT_S)
    worker.stop()
    assert job.runs == 2


def test_the_schedule_asked_for_is_followed() -> None:
    job = Job()
    delays = iter([0.0, 0.0, math.inf])
    worker = periodic(job, math.inf, next_in=lambda: next(delays))
    worker.start()
    assert poll(lambda: job.runs == 2)
    worker.stop()
    assert job.runs == 2


def test_a_failed_run_is_logged_and_the_next_comes(caplog: pytest.LogCaptureFixture) -> None:
    job = Job(fail_on=(1,))
    worker = periodic(job, 0.01)
    worker.start()
    assert poll(lambda: job.runs >= 2)
    worker.stop()
    failures = [r for r in caplog.records if r.getMessage() == "a tick failed"]
    assert len(failures) == 1 and failures[0].exc_info is not None


def test_it_starts_again_after_a_stop() -> None:
    job = Job()
    worker = periodic(job, math.inf, at_start=True)
    for runs in (1, 2):
        worker.start()
        assert poll(lambda: job.runs == runs)  # noqa: B023 (polled before the next round)
        worker.stop()
