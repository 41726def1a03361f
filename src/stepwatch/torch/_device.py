"""Where step times come from: the wall clock on the host, CUDA events on a GPU.

A CUDA event measures the time the GPU spent between two points of the stream,
and reading it needs no synchronisation once ``query()`` says it has passed;
tensors are copied to the host the same way (``non_blocking``), so watching a
GPU run adds no wait to the training loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import torch

__all__ = ["Cuda", "Device", "Host", "device_of"]

Mark = Any  # a float on the host, a recorded event on a GPU


class Device(Protocol):
    """Marks points in time and brings tensors to the host, without waiting for the device."""

    def mark(self) -> Mark: ...
    def seconds(self, start: Mark, end: Mark) -> float: ...
    def ready(self, mark: Mark) -> bool: ...
    def wait(self, mark: Mark) -> None: ...
    def fetch(self, value: object) -> object: ...
    def memory(self) -> tuple[dict[str, object], dict[str, object]] | None: ...


class Host:
    """CPU training: marks are ``perf_counter`` readings and every value is ready at once."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock

    def mark(self) -> float:
        return self._clock()

    def seconds(self, start: float, end: float) -> float:
        return end - start

    def ready(self, mark: float) -> bool:
        return True

    def wait(self, mark: float) -> None:
        """Nothing to wait for on the host."""

    def fetch(self, value: object) -> object:
        """A tensor is read now (a host tensor's value is there already): ``log`` gets a number."""
        return value.item() if isinstance(value, torch.Tensor) else value

    def memory(self) -> None:
        return None


def _torch_memory(device: torch.device) -> dict[str, object]:
    """The caching allocator's counters (host-side reads, no synchronisation)."""
    return {
        "gpu.torch_allocated_bytes": float(torch.cuda.memory_allocated(device)),
        "gpu.torch_reserved_bytes": float(torch.cuda.memory_reserved(device)),
        "gpu.torch_peak_bytes": float(torch.cuda.max_memory_allocated(device)),
    }


class Cuda:
    """GPU training: marks are timing events on the current stream, read once they have passed.

    ``event``, ``stream`` and ``memory`` are the CUDA boundary (tests pass fakes).
    """

    def __init__(
        self,
        device: torch.device,
        *,
        event: Callable[..., Any] = torch.cuda.Event,
        stream: Callable[[torch.device], Any] = torch.cuda.current_stream,
        memory: Callable[[torch.device], dict[str, object]] = _torch_memory,
    ) -> None:
        self.device, self._event, self._stream, self._memory = device, event, stream, memory
        self._labels: dict[str, object] = {"gpu": device.index or 0}

    def mark(self) -> Any:
        event = self._event(enable_timing=True)
        event.record(self._stream(self.device))
        return event

    def seconds(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1000.0

    def ready(self, mark: Any) -> bool:
        return bool(mark.query())

    def wait(self, mark: Any) -> None:
        mark.synchronize()

    def fetch(self, value: object) -> object:
        """A GPU tensor starts its copy to (pinned) host memory; a host one is read now."""
        if not isinstance(value, torch.Tensor):
            return value
        if value.is_cuda:
            return value.detach().to("cpu", non_blocking=True)
        return value.item()

    def memory(self) -> tuple[dict[str, object], dict[str, object]]:
        return self._memory(self.device), self._labels


def device_of(module: torch.nn.Module) -> Device:
    """The device that times a model: CUDA events when its parameters live on a GPU."""
    param = next(module.parameters(), None)
    if param is None or param.device.type != "cuda":
        return Host()
    index = param.device.index
    return Cuda(torch.device("cuda", torch.cuda.current_device() if index is None else index))
