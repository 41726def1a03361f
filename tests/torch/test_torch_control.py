"""control() on a plain PyTorch loop: each command's effect on the optimizer and the model, and
its answer. Commands come through the real poller from an in-memory collector."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from stepwatch.sdk import CommandPoller, Run
from stepwatch.spool import Response
from stepwatch.torch import Control, StopTraining
from stepwatch.torch._control import Control as ControlClass


class Collector:
    """Serves queued commands to the poller and keeps the answers it posts."""

    def __init__(self) -> None:
        self.commands: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def send(self, action: str, **args: float) -> str:
        with self.lock:
            cid = f"c{len(self.commands) + 1}"
            self.commands.append(
                {"id": cid, "seq": len(self.commands) + 1, "action": action, "args": args,
                 "status": "pending"}
            )  # fmt: skip
        return cid

    def get(self, path: str) -> Response:
        after = int(path.rsplit("after=", 1)[1])
        with self.lock:
            return Response(200, {"value": [c for c in self.commands if c["seq"] > after]})

    def post_json(self, path: str, doc: dict[str, Any]) -> Response:
        cid = path.split("/")[-2]
        with self.lock:
            self.answers[cid] = doc
            for command in self.commands:
                if command["id"] == cid:
                    command["status"] = doc["result"]
        return Response(200, {})

    def close(self) -> None:
        pass


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    run = Run(dir=tmp_path, heartbeat_s=None)
    yield run
    run.finish()


@pytest.fixture
def collector() -> Collector:
    return Collector()


def model_and_optimizer(lr: float = 0.1) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return model, torch.optim.SGD(model.parameters(), lr=lr)


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, nan: bool = False) -> None:
    optimizer.zero_grad()
    x, y = torch.randn(8, 4), torch.randn(8, 1)  # fresh data: the gradients never vanish
    torch.nn.functional.mse_loss(model(x), y).backward()
    if nan:
        model.weight.grad[0, 0] = float("nan")  # type: ignore[index]
    optimizer.step()


def attach(run: Run, collector: Collector, optimizer: torch.optim.Optimizer, **kw: Any) -> Control:
    poller = CommandPoller(collector, run.id, interval_s=0.01)
    return ControlClass(run, optimizer, poller=poller, **kw)


def until_answered(
    collector: Collector, cid: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while cid not in collector.answers and time.monotonic() < deadline:
        step(model, optimizer)
        time.sleep(0.01)
    return collector.answers[cid]


def test_lower_lr_scales_every_group_and_the_schedulers_base_rates(
    run: Run, collector: Collector
) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(
        [{"params": model[0].parameters(), "lr": 0.1}, {"params": model[1].parameters()}], lr=0.4
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1.0)
    with attach(run, collector, optimizer, scheduler=scheduler):
        answer = until_answered(collector, collector.send("lower_lr", factor=0.5), model, optimizer)
        scheduler.step()  # the scheduler sets the lowered rates again, not the old ones
    assert answer["result"] == "ok" and "0.1 -> 0.05" in answer["detail"]
    assert [g["lr"] for g in optimizer.param_groups] == [0.05, 0.2]


def test_skip_step_drops_updates_with_non_finite_gradients_only(
    run: Run, collector: Collector
) -> None:
    model, optimizer = model_and_optimizer()
    with attach(run, collector, optimizer) as ctl:
        answer = until_answered(collector, collector.send("skip_step", steps=5), model, optimizer)
        before = [p.detach().clone() for p in model.parameters()]
        step(model, optimizer, nan=True)
        assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
        assert ctl.skipped == [ctl.step - 1]
        step(model, optimizer)
        assert not torch.equal(before[0], model.weight)  # finite ones go through
        for _ in range(5):
            step(model, optimizer)
        step(model, optimizer, nan=True)  # the guard has run out
    assert answer["result"] == "ok"
    assert not torch.isfinite(model.weight).all()


def test_rollback_loads_the_last_good_checkpoint_and_drops_the_pending_update(
    run: Run, collector: Collector
) -> None:
    model, optimizer = model_and_optimizer()
    saved: dict[int, dict[str, torch.Tensor]] = {}
    loaded: list[int] = []

    def save(at: int) -> None:
        saved[at] = {k: v.clone() for k, v in model.state_dict().items()}

    def load(at: int) -> None:
        loaded.append(at)
        model.load_state_dict(saved[at])

    with attach(run, collector, optimizer, save=save, load=load) as ctl:
        failed = until_answered(collector, collector.send("rollback"), model, optimizer)
        assert ctl.checkpoint(7)
        good = {k: v.clone() for k, v in model.state_dict().items()}
        step(model, optimizer, nan=True)
        assert not ctl.checkpoint()  # a poisoned model is not a checkpoint
        answer = until_answered(collector, collector.send("rollback"), model, optimizer)
    assert failed["result"] == "failed" and "no good checkpoint" in failed["detail"]
    assert answer["result"] == "ok" and loaded == [7] and ctl.checkpoints == [7]
    assert all(torch.equal(good[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("restores_optimizer", [True, False])
def test_a_rollback_keeps_the_rate_lowered_since_its_checkpoint(
    run: Run, collector: Collector, restores_optimizer: bool
) -> None:
    model, optimizer = model_and_optimizer(lr=0.4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1.0)
    saved: dict[int, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}

    def save(at: int) -> None:
        states = (model.state_dict(), optimizer.state_dict(), scheduler.state_dict())
        saved[at] = tuple(copy.deepcopy(state) for state in states)  # type: ignore[assignment]

    def load(at: int) -> None:
        weights, opt_state, sched_state = saved[at]
        model.load_state_dict(weights)
        if restores_optimizer:  # the rates of the checkpoint come back with their states
            optimizer.load_state_dict(opt_state)
            scheduler.load_state_dict(sched_state)

    with attach(run, collector, optimizer, save=save, load=load, scheduler=scheduler) as ctl:
        assert ctl.checkpoint()
        lower = collector.send("lower_lr", factor=0.5)
        lowered = until_answered(collector, lower, model, optimizer)
        answer = until_answered(collector, collector.send("rollback"), model, optimizer)
        scheduler.step()  # the scheduler's base rates are the lowered ones too
    assert lowered["result"] == answer["result"] == "ok"
    assert "kept lowered" in answer["detail"]
    assert [g["lr"] for g in optimizer.param_groups] == [0.2]


def test_checkpoint_calls_save_and_commands_without_a_callback_are_unsupported(
    run: Run, collector: Collector
) -> None:
    model, optimizer = model_and_optimizer()
    with attach(run, collector, optimizer) as ctl:
        answer = until_answered(collector, collector.send("checkpoint"), model, optimizer)
        assert answer["result"] == "unsupported"
        assert until_answered(collector, collector.send("rollback"), model, optimizer)[
            "result"
        ] == ("unsupported")
        with pytest.raises(RuntimeError, match="no save= callback"):
            ctl.checkpoint()
    steps: list[int] = []
    with attach(run, collector, optimizer, save=steps.append):
        answer = until_answered(collector, collector.send("checkpoint"), model, optimizer)
    assert answer["result"] == "ok" and steps == [answer["step"]]


def test_stop_raises_from_the_step_without_a_callback_and_calls_it_otherwise(
    run: Run, collector: Collector
) -> None:
    model, optimizer = model_and_optimizer()
    with attach(run, collector, optimizer) as ctl:
        collector.send("stop", timeout_s=60)
        with pytest.raises(StopTraining, match="asked run"):
            for _ in range(2000):
                step(model, optimizer)
                time.sleep(0.01)
        assert ctl.stop_requested
    flag = threading.Event()
    other = Collector()
    with attach(run, other, optimizer, stop=flag.set):
        until_answered(other, other.send("stop", timeout_s=60), model, optimizer)
    assert flag.is_set()


def test_closing_removes_the_hooks(run: Run, collector: Collector) -> None:
    model, optimizer = model_and_optimizer()
    ctl = attach(run, collector, optimizer)
    ctl.close()
    collector.send("lower_lr", factor=0.5)
    for _ in range(5):
        step(model, optimizer)
    assert optimizer.param_groups[0]["lr"] == 0.1 and ctl.controller.applied == []
