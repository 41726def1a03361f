"""The SDK's side of training control: polling a real collector (or a dead one), applying commands
in order at step boundaries, answering each, and the hard stop after a graceful one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.sdk import FAILED, OK, UNSUPPORTED, Command, Controller, Outcome, Run


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[Callable[..., Run]]:
    runs: list[Run] = []

    def start(url: str, rank: int = 0) -> Run:
        run = Run(
            server=url, dir=tmp_path, run_id="r1", flush_interval_s=0.1, heartbeat_s=None,
            labels={"rank": rank},
        )  # fmt: skip
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.finish(timeout_s=1.0)


def issue(url: str, action: str, ranks: Sequence[int] = (), **args: float) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=10) as client:
        client.post("/api/v1/runs", json={"id": "r1"})
        body = {"action": action, "args": args, "ranks": list(ranks)}
        reply = client.post("/api/v1/runs/r1/commands", json=body)
        assert reply.status_code == 201, reply.text
        made: dict[str, Any] = reply.json()
        return made


def until(check: Callable[[], bool], step: Callable[[], object] = lambda: None) -> None:
    deadline = time.monotonic() + 20
    while not check() and time.monotonic() < deadline:
        step()
        time.sleep(0.02)


def test_a_collector_that_is_down_costs_the_loop_nothing(
    make_run: Callable[[str], Run], port: int
) -> None:
    run = make_run(f"http://127.0.0.1:{port}")  # nobody listens there
    controller = Controller(run, {}, interval_s=0.01)
    poller = controller._poller
    assert poller is not None
    until(lambda: poller.failures >= 2)
    assert controller.boundary(0) == [] and poller.failures >= 2
    controller.close()


def test_commands_are_applied_in_order_and_each_is_answered(
    server: Any, make_run: Callable[[str], Run]
) -> None:
    made = [
        issue(server.url, "lower_lr", factor=0.5),
        issue(server.url, "checkpoint"),
        issue(server.url, "rollback"),
        issue(server.url, "lower_lr", factor=0.1),
    ]
    seen: list[tuple[str, float, int]] = []

    def lower(command: Command, step: int) -> Outcome:
        seen.append((command.action, command.args["factor"], step))
        return Outcome(OK, "lowered")

    def broken(command: Command, step: int) -> Outcome:
        raise OSError("disk full")

    run = make_run(server.url)
    controller = Controller(run, {"lower_lr": lower, "checkpoint": broken}, interval_s=0.02)
    step = iter(range(10_000))
    until(lambda: len(controller.applied) == 4, lambda: controller.boundary(next(step)))
    controller.close()
    results = [(c.id, o.result) for c, o in controller.applied]
    assert results == list(zip([m["id"] for m in made], [OK, FAILED, UNSUPPORTED, OK], strict=True))
    assert [s[:2] for s in seen] == [("lower_lr", 0.5), ("lower_lr", 0.1)]
    assert "OSError: disk full" in controller.applied[1][1].detail
    stored = httpx.get(f"{server.url}/api/v1/runs/r1/commands", timeout=10).json()
    assert [c["status"] for c in stored] == [OK, FAILED, UNSUPPORTED, OK]
    assert stored[0]["step"] == seen[0][2] and stored[3]["step"] == seen[1][2]
    again = Controller(make_run(server.url), {"lower_lr": lower}, interval_s=0.02)
    assert again._poller is not None
    polls = again._poller.polls
    until(lambda: again._poller is not None and again._poller.polls > polls + 2)
    assert again.boundary(0) == []  # answered commands are never applied twice
    again.close()


def _stop_requested(
    server: Any, make_run: Callable[[str], Run], timeout_s: float
) -> tuple[Controller, threading.Event]:
    """A controller that has seen a ``stop`` due within ``timeout_s``, and the event its hard
    stop sets."""
    issue(server.url, "stop", timeout_s=timeout_s)
    stopped = threading.Event()
    controller = Controller(
        make_run(server.url),
        {"stop": lambda c, s: Outcome(OK)},
        interval_s=0.02,
        hard_stop=stopped.set,
    )
    until(lambda: controller.stop_requested, lambda: controller.boundary(1))
    return controller, stopped


def test_a_stop_that_is_not_obeyed_becomes_a_hard_stop(
    server: Any, make_run: Callable[[str], Run]
) -> None:
    controller, stopped = _stop_requested(server, make_run, timeout_s=0.2)
    assert controller.stop_requested
    assert stopped.wait(10)
    controller.close()


def test_a_loop_that_stops_in_time_is_not_stopped_hard(
    server: Any, make_run: Callable[[str], Run]
) -> None:
    controller, stopped = _stop_requested(server, make_run, timeout_s=1.0)
    controller.close()
    assert not stopped.wait(1.5)


def test_without_a_collector_nothing_is_polled(tmp_path: Path) -> None:
    run = Run(dir=tmp_path, heartbeat_s=None)
    controller = Controller(run, {})
    assert controller.boundary(0) == []
    controller.close()
    run.finish()


def test_every_rank_applies_and_rank_0_answers(server: Any, make_run: Callable[..., Run]) -> None:
    made = issue(server.url, "lower_lr", factor=0.5)
    ranks = [make_run(server.url, rank) for rank in (1, 0)]
    controllers = [
        Controller(r, {"lower_lr": lambda c, s: Outcome(OK)}, interval_s=0.02) for r in ranks
    ]
    other, leader = controllers
    until(lambda: bool(other.applied), lambda: other.boundary(3))
    other.close()
    listed = httpx.get(f"{server.url}/api/v1/runs/r1/commands", timeout=10).json()
    assert [c["status"] for c in listed] == ["pending"]  # rank 1 applied it, but did not answer
    until(lambda: bool(leader.applied), lambda: leader.boundary(3))
    leader.close()
    listed = httpx.get(f"{server.url}/api/v1/runs/r1/commands", timeout=10).json()
    assert [(c["id"], c["status"]) for c in listed] == [(made["id"], OK)]


def test_a_command_for_some_ranks_is_applied_and_answered_by_each_of_them_alone(
    server: Any, make_run: Callable[..., Run]
) -> None:
    issue(server.url, "profile", ranks=[1, 2], steps=2)
    seen: list[int] = []

    def on(rank: int) -> Controller:
        def profile(command: Command, step: int) -> Outcome:
            seen.append(rank)
            return Outcome(OK, f"on rank {rank}")

        return Controller(make_run(server.url, rank), {"profile": profile}, interval_s=0.02)

    other, first, last = (on(rank) for rank in (0, 1, 2))
    until(lambda: bool(first.applied), lambda: first.boundary(3))
    first.close()
    (listed,) = httpx.get(f"{server.url}/api/v1/runs/r1/commands", timeout=10).json()
    assert listed["status"] == "pending" and list(listed["answers"]) == ["1"]
    again = on(1)  # rank 1 restarted: it answered already
    for controller in (other, again):
        assert controller._poller is not None
        polls = controller._poller.polls
        until(
            lambda c=controller, n=polls: c._poller.polls > n + 2,
            lambda c=controller: c.boundary(4),
        )
        assert controller.boundary(4) == [] and controller.applied == []
        controller.close()
    until(lambda: bool(last.applied), lambda: last.boundary(5))
    last.close()
    assert seen == [1, 2]
    (listed,) = httpx.get(f"{server.url}/api/v1/runs/r1/commands", timeout=10).json()
    assert (listed["status"], listed["step"]) == (OK, 3)
    assert listed["detail"] == "rank 1: ok (on rank 1); rank 2: ok (on rank 2)"
