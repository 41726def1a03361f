"""`stepwatch run --parse FORMAT -- CMD`: the metrics a command prints become its run's series."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx

# A trainer that cannot import the SDK: torchtitan's metrics line, coloured, on stdout.
TRAIN = textwrap.dedent(
    """
    import sys
    for step, loss in [(1, "10.8765"), (2, " 9.1234"), (3, "    nan")]:
        print(f"[titan] 2025-03-01 10:00:0{step},000 - root - INFO - \\x1b[31mstep: {step:2}  "
              f"\\x1b[32mloss: {loss}  \\x1b[34mtps: 12,345  \\x1b[35mmfu: 41.20%\\x1b[39m",
              flush=True)
    print("step 3: checkpoint saved", file=sys.stderr, flush=True)
    """
)


def _get(url: str, path: str, **params: Any) -> Any:
    with httpx.Client(base_url=url, timeout=10) as client:
        response = client.get(path, params=params)
        response.raise_for_status()
        return response.json()


def test_the_commands_metric_lines_become_series_at_their_steps(
    server: Any, tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    command = [sys.executable, "-m", "stepwatch.cli", "run", "--dir", str(tmp_path / "spool")]
    args = ["--server", server.url, "--gpu", "none", "--run-id", "titan-1", "--parse", "auto"]
    done = subprocess.run(
        [*command, *args, "--", sys.executable, "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"\x1b[32mloss: 10.8765" in done.stdout  # echoed as it was
    (series,) = _get(server.url, "/api/v1/series", name="train.loss", run="titan-1")
    raw = _get(server.url, "/api/v1/query/raw", series=series["id"])
    assert raw["step"] == [1, 2, 3] and raw["value"][:2] == [10.8765, 9.1234]
    assert math.isnan(float(raw["value"][2]))
    (tps,) = _get(server.url, "/api/v1/series", name="train.tokens_per_s_per_gpu", run="titan-1")
    assert _get(server.url, "/api/v1/query/raw", series=tps["id"])["value"] == [12345.0] * 3
    lines = [e["text"] for e in _get(server.url, "/api/v1/events", run="titan-1", kind="log")]
    assert "step 3: checkpoint saved" in lines and len(lines) == 4
