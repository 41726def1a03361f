"""watch() on the CPU: what each optimizer step records, and that the hooks leave no trace."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import stepwatch
import stepwatch.torch as swt
from stepwatch.torch import Host, Watcher, watch

from .conftest import FakeClock, RecordingRun, stored, tiny_model, train_step


def by_hand_norm(model: torch.nn.Module) -> float:
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return float(torch.sqrt((grads.double() ** 2).sum()))


def test_exported_names() -> None:
    assert sorted(swt.__all__) == [
        "Control",
        "Cuda",
        "Device",
        "Host",
        "Profile",
        "StopTraining",
        "Watcher",
        "control",
        "profile",
        "watch",
    ]


def test_grad_norm_without_clipping_is_the_norm_of_all_gradients() -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = {}
    with watch(model, optimizer, run):  # type: ignore[arg-type]
        for step in range(3):
            optimizer.zero_grad()
            model(torch.randn(4, 8)).pow(2).mean().backward()
            expected[step] = by_hand_norm(model)
            optimizer.step()
    got = run.series("train.grad_norm")
    assert got.keys() == expected.keys()
    assert all(math.isclose(got[s], expected[s], rel_tol=1e-5) for s in expected)


@pytest.fixture
def norm_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every ``torch._foreach_norm`` pass (clip_grad_norm_ and watch() both use it)."""
    calls: list[int] = []
    original = torch._foreach_norm

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(torch, "_foreach_norm", counting)
    return calls


@pytest.mark.parametrize("clip", [None, 0.01])
def test_one_norm_pass_per_step_and_the_clip_norm_is_reused(
    norm_calls: list[int], clip: float | None
) -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    returned = {}
    with watch(model, optimizer, run):  # type: ignore[arg-type]
        for step in range(4):
            returned[step] = train_step(model, optimizer, clip)
    assert len(norm_calls) == 4
    if clip is not None:
        assert run.series("train.grad_norm") == {s: float(n) for s, n in returned.items()}
        assert all(float(n) > clip for n in returned.values())  # the norm before clipping


def test_clipping_other_parameters_is_not_taken_for_the_watched_norm(
    norm_calls: list[int],
) -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, optimizer, run):  # type: ignore[arg-type]
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        torch.nn.utils.clip_grad_norm_(model[0].parameters(), 1e9, norm_type=2.0)
        expected = by_hand_norm(model)
        optimizer.step()
    assert len(norm_calls) == 2  # the partial clip, then watch()'s own pass
    assert math.isclose(run.series("train.grad_norm")[0], expected, rel_tol=1e-5)


def test_learning_rate_per_param_group() -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.SGD(
        [{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.5}], lr=0.1
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    with watch(model, optimizer, run):  # type: ignore[arg-type]
        for _ in range(3):
            train_step(model, optimizer)
            scheduler.step()
    assert run.series("train.lr", {"group": 0}) == {0: 0.1, 1: 0.05, 2: 0.025}
    assert run.series("train.lr", {"group": 1}) == {0: 0.5, 1: 0.25, 2: 0.125}
    assert run.series("train.lr") == {}


def test_single_group_learning_rate_is_plain_train_lr() -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    with watch(model, optimizer, run):  # type: ignore[arg-type]
        train_step(model, optimizer)
    assert run.series("train.lr") == {0: 3e-4}


def test_timings_follow_the_clock_through_data_forward_comm_and_step() -> None:
    run, model, clock = RecordingRun(), tiny_model(), FakeClock()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    counted = iter([1000, 3000])
    tokens = lambda: next(counted)  # noqa: E731
    with Watcher(model, optimizer, run, tokens_per_step=tokens, device=Host(clock)) as watcher:  # type: ignore[arg-type]
        for data_s in (0.5, 2.0):
            clock.now += data_s  # waiting for the batch
            loss = model(torch.randn(4, 8)).sum()
            clock.now += 0.25  # forward and backward
            loss.backward()
            with watcher.comm():
                clock.now += 0.125  # all-reduce
            clock.now += 0.0625  # optimizer
            optimizer.step()
    first, second = (values for _, values, labels in run.calls if labels is None)
    compute = 0.25 + 0.0625
    assert first["train.compute_time_s"] == compute and first["train.comm_time_s"] == 0.125
    assert first["train.step_time_s"] == compute + 0.125  # no previous step: no data time
    assert "train.data_time_s" not in first
    assert second["train.data_time_s"] == 2.0 and second["train.compute_time_s"] == compute
    assert second["train.step_time_s"] == 2.0 + compute + 0.125
    assert second["train.tokens_per_s"] == 3000 / second["train.step_time_s"]


def test_data_time_reflects_a_slow_data_loader() -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def slow_batches() -> Any:
        for _ in range(3):
            time.sleep(0.05)
            yield torch.randn(4, 8)

    with watch(model, optimizer, run, tokens_per_step=256):  # type: ignore[arg-type]
        for batch in slow_batches():
            optimizer.zero_grad()
            model(batch).sum().backward()
            optimizer.step()
    data, compute = run.series("train.data_time_s"), run.series("train.compute_time_s")
    step, tokens = run.series("train.step_time_s"), run.series("train.tokens_per_s")
    assert sorted(data) == [1, 2] and all(d >= 0.05 for d in data.values())
    assert all(c > 0 for c in compute.values()) and sorted(step) == [0, 1, 2]
    assert all(step[s] >= data[s] + compute[s] for s in data)
    assert tokens == {s: 256 / t for s, t in step.items()}
    assert "train.comm_time_s" not in run.calls[0][1]  # never timed, never reported


def test_evaluation_forward_does_not_start_a_step() -> None:
    run, model, clock = RecordingRun(), tiny_model(), FakeClock()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(model, optimizer, run, device=Host(clock)):  # type: ignore[arg-type]
        train_step(model, optimizer)
        with torch.no_grad():
            model(torch.randn(4, 8))  # evaluation: still the wait before step 1
        model.eval()
        model(torch.randn(4, 8))
        model.train()
        clock.now += 3.0
        train_step(model, optimizer)
    assert run.series("train.data_time_s") == {1: 3.0}


def test_update_ratio_on_its_steps() -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = {}
    with watch(model, optimizer, run, ratio_every=2):  # type: ignore[arg-type]
        for step in range(5):
            before = [p.detach().clone() for p in model.parameters()]
            train_step(model, optimizer)
            after = [p.detach() for p in model.parameters()]
            update = torch.cat([(a - b).flatten() for a, b in zip(after, before, strict=True)])
            norm = torch.cat([a.flatten() for a in after]).norm()
            expected[step] = float(update.norm() / norm)
    got = run.series("train.update_ratio")
    assert sorted(got) == [0, 2, 4]
    assert all(math.isclose(got[s], expected[s], rel_tol=1e-4) for s in got)


def test_log_every_and_start_step() -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, optimizer, run, log_every=3, start_step=10) as watcher:  # type: ignore[arg-type]
        for _ in range(7):
            train_step(model, optimizer)
        assert watcher.step == 17
    assert sorted({step for step, _, _ in run.calls}) == [12, 15]
    assert sorted(run.series("train.data_time_s")) == [12, 15]


def test_other_ranks_record_timings_only() -> None:
    run, model = RecordingRun(labels={"run": "r", "rank": "3"}), tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, optimizer, run, tokens_per_step=10, ratio_every=1):  # type: ignore[arg-type]
        for _ in range(2):
            train_step(model, optimizer, clip=1.0)
    names = {name for _, values, _ in run.calls for name in values}
    assert names == {"train.step_time_s", "train.compute_time_s", "train.data_time_s"}


def test_close_removes_every_hook() -> None:
    run, model = RecordingRun(), tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    original = torch.nn.utils.clip_grad_norm_
    watcher = watch(model, optimizer, run)  # type: ignore[arg-type]
    assert torch.nn.utils.clip_grad_norm_ is not original
    train_step(model, optimizer, clip=1.0)
    watcher.close()
    watcher.close()
    assert torch.nn.utils.clip_grad_norm_ is original
    assert not model._forward_pre_hooks
    assert not optimizer._optimizer_step_pre_hooks and not optimizer._optimizer_step_post_hooks
    logged = len(run.calls)
    train_step(model, optimizer, clip=1.0)
    assert len(run.calls) == logged == 1


def test_two_watchers_share_one_clip_wrapper() -> None:
    runs, models = (RecordingRun(), RecordingRun()), (tiny_model(0), tiny_model(1))
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    original = torch.nn.utils.clip_grad_norm_
    first = watch(models[0], optimizers[0], runs[0])  # type: ignore[arg-type]
    wrapper = torch.nn.utils.clip_grad_norm_
    with watch(models[1], optimizers[1], runs[1]):  # type: ignore[arg-type]
        assert torch.nn.utils.clip_grad_norm_ is wrapper
        norms = [train_step(m, o, clip=1e9) for m, o in zip(models, optimizers, strict=True)]
    assert torch.nn.utils.clip_grad_norm_ is wrapper
    first.close()
    assert torch.nn.utils.clip_grad_norm_ is original
    assert [r.series("train.grad_norm") for r in runs] == [{0: float(n)} for n in norms]


def test_watch_uses_the_current_run_and_needs_one(tmp_path: Path) -> None:
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="stepwatch.init"):
        watch(model, optimizer)
    run = stepwatch.init(dir=tmp_path, flush_interval_s=3600)
    try:
        with watch(model, optimizer) as watcher:
            assert watcher.run is run
            train_step(model, optimizer)
            run.finish()
            train_step(model, optimizer)  # after the run ended: nothing logged, nothing raised
    finally:
        stepwatch.finish()
    with pytest.raises(RuntimeError, match="running run"):
        watch(model, optimizer, run)


def test_bad_arguments() -> None:
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for kwargs in ({"log_every": 0}, {"ratio_every": 0}, {"start_step": -1}):
        with pytest.raises(ValueError):
            watch(model, optimizer, RecordingRun(), **kwargs)  # type: ignore[arg-type]


def test_a_wrapped_optimizer_is_hooked_through_its_inner_one() -> None:
    run, model = RecordingRun(), tiny_model()
    inner = torch.optim.SGD(model.parameters(), lr=0.1)

    class Wrapper:  # how accelerate's AcceleratedOptimizer holds the real one
        optimizer = inner

    with watch(model, Wrapper(), run):  # type: ignore[arg-type]
        train_step(model, inner)
    assert run.series("train.lr") == {0: 0.1}


def test_a_loss_logged_without_step_lands_on_the_step_in_progress(
    server: Any, tmp_path: Path
) -> None:
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, targets = torch.randn(4, 8), torch.randn(4, 1)
    losses: dict[int, float] = {}
    run = stepwatch.init(run_id="r-steps", server=server.url, dir=tmp_path, heartbeat_s=None)
    with run, watch(model, optimizer, run, start_step=10):
        run.log({"warmup_flag": 1.0})  # before the first step: the start step
        for step in range(10, 14):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            run.log({"loss_before_step": loss})  # between forward and optimizer.step()
            optimizer.step()
            run.log({"loss": loss})  # after optimizer.step(): still this step
            losses[step] = loss.detach().item()
            with torch.no_grad():
                model(inputs)  # an evaluation forward does not start the next step
            run.log({"loss": loss}, step=step + 100)  # an explicit step wins
    got = stored(server.url, "train.loss", "r-steps")
    assert got == {**losses, **{s + 100: v for s, v in losses.items()}}
    assert sorted(stored(server.url, "loss_before_step", "r-steps")) == [10, 11, 12, 13]
    assert stored(server.url, "warmup_flag", "r-steps") == {10: 1.0}
    assert sorted(stored(server.url, "train.grad_norm", "r-steps")) == [10, 11, 12, 13]
