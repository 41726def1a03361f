"""Helpers of the framework-integration tests: a recording run, a fake GPU, the query API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
import torch

Logged = tuple[int | None, dict[str, Any], dict[str, object] | None]


@dataclass
class RecordingRun:
    """Stands in for a Run: keeps every ``log`` call as (step, values, labels)."""

    labels: dict[str, str] = field(default_factory=lambda: {"run": "r"})
    finished: bool = False
    server: str | None = None  # no collector: no commands to poll
    calls: list[Logged] = field(default_factory=list)

    def log(
        self, data: dict[str, Any], step: int | None = None, labels: dict[str, object] | None = None
    ) -> None:
        self.calls.append((step, dict(data), labels))

    def series(self, name: str, labels: dict[str, object] | None = None) -> dict[int, float]:
        """``{step: value}`` of one metric among the calls with exactly these extra labels."""
        return {
            step: float(values[name])
            for step, values, extra in self.calls
            if name in values and extra == labels and step is not None
        }


class RandomTokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """A seeded dataset of 16-token sequences that are their own labels, for a tiny GPT-2."""

    def __init__(self, n: int) -> None:
        self.tokens = torch.randint(0, 64, (n, 16), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.tokens[i], "labels": self.tokens[i]}


class FakeClock:
    """A perf_counter the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeGpu:
    """A GPU stream the test drives: events complete only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0  # GPU time the next recorded event gets
        self.completed = -1.0  # events recorded at or before this time have passed
        self.syncs = 0

    def event(self, enable_timing: bool = False) -> FakeEvent:
        assert enable_timing
        return FakeEvent(self)

    def finish_all(self) -> None:
        self.completed = self.now


class FakeEvent:
    """``torch.cuda.Event`` over a FakeGpu: elapsed_time refuses events that have not passed."""

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.t = gpu, float("nan")

    def record(self, stream: object) -> None:
        assert stream == "stream"
        self.t = self.gpu.now

    def query(self) -> bool:
        return self.t <= self.gpu.completed

    def synchronize(self) -> None:
        self.gpu.syncs += 1
        self.gpu.completed = max(self.gpu.completed, self.t)

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.query() and end.query(), "read before the GPU got there"
        return (end.t - self.t) * 1000.0


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def train_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, clip: float | None = None
) -> torch.Tensor | None:
    """One plain step on random data; returns what clip_grad_norm_ returned, if it was called."""
    inputs, targets = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(inputs), targets).backward()
    norm = None
    if clip is not None:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return norm


def find_series(url: str, name: str, run: str, **labels: object) -> list[dict[str, Any]]:
    """The stored series ``name`` of ``run`` that carry these labels."""
    params = {"name": name, "run": run, "label": [f"{k}:{v}" for k, v in labels.items()]}
    found: list[dict[str, Any]] = httpx.get(
        f"{url}/api/v1/series", params=params, timeout=10
    ).json()
    return found


def stored(url: str, name: str, run: str, **labels: object) -> dict[int, Any]:
    """``{step: value}`` of the one stored series ``name`` of ``run`` with these labels."""
    found = find_series(url, name, run, **labels)
    assert len(found) == 1, f"{name} {labels}: {found}"
    raw = httpx.get(f"{url}/api/v1/query/raw", params={"series": found[0]["id"]}, timeout=10)
    data = raw.json()
    return dict(zip(data["step"], data["value"], strict=True))


def events(url: str, run: str, kind: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=10) as client:
        found: list[dict[str, Any]] = client.get(
            "/api/v1/events", params={"run": run, "kind": kind}
        ).json()
    return found
