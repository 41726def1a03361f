"""Traces the tests build: real torch.profiler profiles of small CPU models, hand-written
GPU-style events with known intervals, and a big trace streamed to disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PID, TID = 100, 100


def profile_cpu_model(path: Path, steps: int = 4, with_stack: bool = False) -> Any:
    """Profile a few training steps of a small transformer-like model on the CPU (a
    DataLoader, LayerNorm, attention-like matmuls, AdamW) and export its Chrome trace;
    returns the profiler, for its key_averages()."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             batch_first=True)  # fmt: skip
    head = torch.nn.Linear(32, 8)
    params = [*layer.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    loader = torch.utils.data.DataLoader(torch.randn(steps * 4, 16, 32), batch_size=4)
    with profile(activities=[ProfilerActivity.CPU], with_stack=with_stack) as prof:
        for i, x in enumerate(loader):
            with record_function(f"ProfilerStep#{i}"):
                loss = head(layer(x)).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
    prof.export_chrome_trace(str(path))
    return prof


def op(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = TID,
       correlation: int | None = None) -> dict[str, Any]:  # fmt: skip
    event = {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur}
    if correlation is not None:
        event["args"] = {"correlation": correlation}
    return event


def gpu(name: str, ts: float, dur: float, cat: str = "kernel", stream: int = 7,
        device: int = 0, correlation: int | None = None) -> dict[str, Any]:  # fmt: skip
    args = {"device": device, "stream": stream}
    if correlation is not None:
        args["correlation"] = correlation
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": f"stream {stream}",
            "ts": ts, "dur": dur, "args": args}  # fmt: skip


def write_trace(path: Path, events: list[dict[str, Any]], **metadata: Any) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, **metadata, "traceEvents": events}))
    return path


def replicate(source: Path, target: Path, size_bytes: int) -> int:
    """Write a trace of about ``size_bytes`` from a real one: its operator events repeated,
    each copy shifted past the last, written as they go (never whole in memory); returns
    how many copies."""
    events = [e for e in json.loads(source.read_text())["traceEvents"]
              if e.get("ph") == "X" and isinstance(e.get("pid"), int)]  # fmt: skip
    first = min(e["ts"] for e in events)
    period = max(e["ts"] + e["dur"] for e in events) - first + 10.0
    copies = 0
    with target.open("w") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n')
        sep = ""
        while out.tell() < size_bytes:
            for e in events:
                shifted = dict(e, ts=round(e["ts"] + copies * period, 3))
                out.write(sep + json.dumps(shifted, indent=2))
                sep = ",\n"
            copies += 1
        out.write('\n], "traceName": "replicated"}\n')
    return copies
