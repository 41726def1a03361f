"""watch() on a GPU, with fake CUDA events: values are read only once the stream got there."""

from __future__ import annotations

import torch

from stepwatch.torch import Cuda, Watcher
from stepwatch.torch._steps import MAX_PENDING

from .conftest import FakeGpu, RecordingRun, tiny_model

MEMORY = {
    "gpu.torch_allocated_bytes": 1.0,
    "gpu.torch_reserved_bytes": 2.0,
    "gpu.torch_peak_bytes": 3.0,
}


def gpu_watcher(
    run: RecordingRun, gpu: FakeGpu, **kwargs: object
) -> tuple[Watcher, torch.nn.Module, torch.optim.Optimizer]:
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    device = Cuda(
        torch.device("cuda", 1),
        event=gpu.event,
        stream=lambda device: "stream",
        memory=lambda device: dict(MEMORY),
    )
    return Watcher(model, optimizer, run, device=device, **kwargs), model, optimizer  # type: ignore[arg-type]


def gpu_step(gpu: FakeGpu, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Data takes 1 s of GPU time (idle), forward/backward 2 s, the optimizer 0.5 s."""
    gpu.now += 1.0
    optimizer.zero_grad()
    loss = model(torch.randn(4, 8)).sum()
    gpu.now += 2.0
    loss.backward()
    gpu.now += 0.5
    optimizer.step()


def test_steps_are_logged_in_order_once_the_gpu_has_finished_them() -> None:
    run, gpu = RecordingRun(), FakeGpu()
    watcher, model, optimizer = gpu_watcher(run, gpu, tokens_per_step=70)
    for _ in range(3):
        gpu_step(gpu, model, optimizer)
    assert run.calls == []  # the GPU is behind: nothing read, nothing waited for
    gpu.finish_all()
    gpu_step(gpu, model, optimizer)  # the next step end reads the finished ones
    assert [step for step, _, labels in run.calls if labels is None] == [0, 1, 2]
    watcher.close()  # waits for the last one
    assert gpu.syncs == 1
    timed = [values for _, values, labels in run.calls if labels is None]
    assert [v["train.compute_time_s"] for v in timed] == [2.5] * 4
    assert [v.get("train.data_time_s") for v in timed] == [None, 1.0, 1.0, 1.0]
    assert [v["train.step_time_s"] for v in timed] == [2.5, 3.5, 3.5, 3.5]
    assert [v["train.tokens_per_s"] for v in timed] == [70 / 2.5] + [20.0] * 3
    assert all(isinstance(v["train.grad_norm"], float) for v in timed)


def test_allocator_memory_is_logged_per_step_with_the_gpu_label() -> None:
    run, gpu = RecordingRun(), FakeGpu()
    watcher, model, optimizer = gpu_watcher(run, gpu)
    with watcher:
        for _ in range(2):
            gpu_step(gpu, model, optimizer)
    memory = [(step, values) for step, values, labels in run.calls if labels == {"gpu": 1}]
    assert memory == [(0, MEMORY), (1, MEMORY)]


def test_comm_blocks_are_gpu_time_taken_out_of_compute() -> None:
    run, gpu = RecordingRun(), FakeGpu()
    watcher, model, optimizer = gpu_watcher(run, gpu)
    with watcher:
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        gpu.now += 1.0
        with watcher.comm():
            gpu.now += 4.0
        optimizer.step()
    (values,) = [values for _, values, labels in run.calls if labels is None]
    assert values["train.comm_time_s"] == 4.0 and values["train.compute_time_s"] == 1.0


def test_a_gpu_far_behind_is_waited_for_oldest_first() -> None:
    run, gpu = RecordingRun(), FakeGpu()
    watcher, model, optimizer = gpu_watcher(run, gpu)
    with watcher:
        for _ in range(MAX_PENDING + 3):
            gpu_step(gpu, model, optimizer)
        assert gpu.syncs == 3
        assert [s for s, _, labels in run.calls if labels is None] == [0, 1, 2]
    assert len([1 for _, _, labels in run.calls if labels is None]) == MAX_PENDING + 3
    assert gpu.syncs == 4  # close() waits for the newest only
