"""A real profile as training processes upload them: torch.profiler's schedule over a few
steps of a small model on the CPU, exported as Chrome JSON."""

from __future__ import annotations

from pathlib import Path

import pytest


def cpu_trace(path: Path, width: int = 64) -> Path:
    """Profile two training steps of a small model on the CPU (one of warm-up before them)
    with torch.profiler's schedule, as ``stepwatch.torch.profile`` does, and export the trace
    to ``path``."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 1))  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(4):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            prof.step()
    return path
