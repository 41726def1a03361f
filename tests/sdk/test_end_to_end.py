"""The SDK against the real collector: a kill -9'd trainer synced, a PyTorch loop, many ranks."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import torch

import stepwatch
from stepwatch.spool import sync

CRASHING_TRAINER = textwrap.dedent(
    """
    import sys
    import stepwatch
    run = stepwatch.init(project="crash", run_id="r-crash", dir=sys.argv[1],
                         labels={"node": "n0"}, flush_interval_s=0.05)
    step = 0
    while True:
        run.log({"loss": 1.0 / (step + 1), "tokens_per_s": float(step)}, step=step)
        if step % 50 == 49:
            run.flush()
            print("flushed", step, flush=True)
        step += 1
    """
)

EXITING_TRAINER = textwrap.dedent(
    """
    import sys
    import stepwatch
    run = stepwatch.init(run_id=sys.argv[2], dir=sys.argv[1], flush_interval_s=3600)
    for step in range(10):
        run.log({"loss": float(step)}, step=step)
    if sys.argv[2] == "r-raise":
        raise RuntimeError("training blew up")
    """
)


def series_values(url: str, name: str, run: str, **labels: object) -> dict[str, Any]:
    """Steps and values of the one series ``name`` of ``run`` matching ``labels``."""
    params: dict[str, Any] = {
        "name": name,
        "run": run,
        "label": [f"{k}:{v}" for k, v in labels.items()],
    }
    with httpx.Client(base_url=url, timeout=10) as client:
        (series,) = client.get("/api/v1/series", params=params).json()
        return client.get("/api/v1/query/raw", params={"series": series["id"]}).json()  # type: ignore[no-any-return]


def get_run(url: str, run_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=10) as client:
        return client.get(f"/api/v1/runs/{run_id}").json()  # type: ignore[no-any-return]


def test_kill_9_loses_nothing_that_was_flushed(server: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHING_TRAINER, str(spool)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        flushed = [int(child.stdout.readline().split()[1]) for _ in range(4)]
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        child.kill()
        if child.stdout is not None:
            child.stdout.close()
    result = sync(spool, server.url)
    assert result.runs == 1 and result.unsent == 0 and result.rejected == 0
    loss = series_values(server.url, "train.loss", "r-crash")
    last = len(loss["step"])
    assert last > flushed[-1]  # everything up to the last completed flush, maybe more
    assert loss["step"] == list(range(last))  # no gaps, no duplicates
    assert loss["value"] == [1.0 / (s + 1) for s in range(last)]
    assert get_run(server.url, "r-crash")["status"] == "running"  # it never said it ended


def test_interpreter_exit_finishes_open_runs(tmp_path: Path) -> None:
    for run_id, status in (("r-exit", "finished"), ("r-raise", "failed")):
        subprocess.run(
            [sys.executable, "-c", EXITING_TRAINER, str(tmp_path), run_id],
            capture_output=True,
            check=status == "finished",
            timeout=120,
        )
        meta = json.loads((tmp_path / run_id / "run.json").read_text())
        assert meta["status"] == status


def test_pytorch_training_loop_is_queried_back_exactly(server: Any, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
    inputs, targets = torch.randn(64, 8), torch.randn(64, 1)
    expected: dict[str, list[float]] = {"train.loss": [], "train.grad_norm": [], "train.lr": []}
    steps = 40
    with stepwatch.init(
        project="torch", run_id="r-torch", server=server.url, dir=tmp_path, labels={"rank": 0}
    ) as run:
        for step in range(steps):
            with run.step(step):
                with run.phase("data"):
                    batch = inputs[(step % 8) * 8 : (step % 8 + 1) * 8]
                    target = targets[(step % 8) * 8 : (step % 8 + 1) * 8]
                with run.phase("compute"):
                    optimizer.zero_grad()
                    loss = torch.nn.functional.mse_loss(model(batch), target)
                    loss.backward()
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                lr = scheduler.get_last_lr()[0]
                run.log({"loss": loss.detach(), "grad_norm": grad_norm, "lr": lr}, step=step)
                scheduler.step()
            expected["train.loss"].append(loss.item())
            expected["train.grad_norm"].append(grad_norm.item())
            expected["train.lr"].append(lr)
    for name, values in expected.items():
        got = series_values(server.url, name, "r-torch", rank=0)
        assert got["step"] == list(range(steps)) and got["value"] == values
    step_time = series_values(server.url, "train.step_time_s", "r-torch")["value"]
    compute = series_values(server.url, "train.compute_time_s", "r-torch")["value"]
    data = series_values(server.url, "train.data_time_s", "r-torch")["value"]
    assert len(step_time) == len(compute) == len(data) == steps
    assert all(
        s >= c + d and c > 0 and d > 0 for s, c, d in zip(step_time, compute, data, strict=True)
    )
    meta = get_run(server.url, "r-torch")
    assert (meta["status"], meta["project"]) == ("finished", "torch")


def test_ranks_simulated_in_one_process_share_the_run(server: Any, tmp_path: Path) -> None:
    ranks = [
        stepwatch.init(
            run_id="r-ranks",
            server=server.url,
            dir=tmp_path,
            labels={"rank": r, "node": f"n{r // 4}"},
        )
        for r in range(8)
    ]
    assert os.listdir(tmp_path / "r-ranks").count("run.json") == 1  # the leader's alone
    for step in range(20):
        for r, run in enumerate(ranks):
            run.log(
                {"compute_time_s": r + step / 100, "loss": math.nan if step == 3 else 1.0},
                step=step,
            )
    for run in reversed(ranks):  # rank 0 last: only its finish ends the run
        run.finish()
    for r in range(8):
        got = series_values(
            server.url, "train.compute_time_s", "r-ranks", rank=r, node=f"n{r // 4}"
        )
        assert got["value"] == [r + s / 100 for s in range(20)]
    assert series_values(server.url, "train.loss", "r-ranks", rank=5)["value"][3] == "NaN"
    assert get_run(server.url, "r-ranks")["status"] == "finished"
    assert not (tmp_path / "r-ranks").exists()  # all of it delivered: its spools went
