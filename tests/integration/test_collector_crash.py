"""kill -9 of the collector mid-stream: after a restart the run ends complete, no duplicates."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx

STEPS = 3000

TRAINER = textwrap.dedent(
    """
    import sys, time, math
    import stepwatch
    run = stepwatch.init(project="crash", run_id="r-kill", server=sys.argv[1],
                         dir=sys.argv[2], labels={"rank": 0, "node": "node0"},
                         flush_interval_s=0.1)
    for i in range(STEPS):
        grad = math.nan if i % 500 == 7 else float(i)
        run.log({"loss": 1.0 / (i + 1), "grad_norm": grad}, step=i)
        time.sleep(0.002)
    run.finish()
    print("finished", flush=True)
    """
).replace("STEPS", str(STEPS))


def _count(url: str, name: str) -> int:
    with httpx.Client(base_url=url, timeout=5) as client:
        series = client.get("/api/v1/series", params={"name": name, "run": "r-kill"}).json()
        if not series:
            return 0
        raw = client.get("/api/v1/query/raw", params={"series": series[0]["id"]}).json()
    return len(raw["step"])


def _wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_collector_killed_mid_stream_loses_and_duplicates_nothing(server, tmp_path: Path) -> None:
    trainer = subprocess.Popen(
        [sys.executable, "-c", TRAINER, server.url, str(tmp_path / "spool")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: _count(server.url, "train.loss") > 200, timeout=30)
        server.kill()
        time.sleep(1.0)  # the trainer keeps logging into its spool meanwhile
        server.restart()
        out, _ = trainer.communicate(timeout=120)
    finally:
        trainer.kill()
    assert "finished" in out
    _wait_for(lambda: _count(server.url, "train.loss") >= STEPS, timeout=30)
    with httpx.Client(base_url=server.url, timeout=5) as client:
        (loss,) = client.get(
            "/api/v1/series", params={"name": "train.loss", "run": "r-kill"}
        ).json()
        raw = client.get("/api/v1/query/raw", params={"series": loss["id"]}).json()
        (grad,) = client.get("/api/v1/series", params={"name": "train.grad_norm"}).json()
        graw = client.get("/api/v1/query/raw", params={"series": grad["id"]}).json()
        run = client.get("/api/v1/runs/r-kill").json()
    assert raw["step"] == list(range(STEPS))
    assert raw["value"] == [1.0 / (i + 1) for i in range(STEPS)]
    assert [v for v in graw["value"] if v == "NaN"] == ["NaN"] * len(range(7, STEPS, 500))
    assert run["status"] == "finished"
