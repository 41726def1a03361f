"""Every Python snippet of the README runs as pasted, against a real collector."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Collector, CollectorFactory

from ._readme import README, Block, blocks

SNIPPETS = [block for block in blocks(README.read_text()) if block.lang == "python"]
#: What a snippet calls when it starts a run, whose data must then be in the collector.
STARTS_RUN = ("stepwatch.init(", "StepwatchCallback(")
RUN_S = 300


@pytest.fixture(scope="module")
def collector(module_collector_factory: CollectorFactory) -> Collector:
    return module_collector_factory()


def run_ids(url: str) -> set[str]:
    return {run["id"] for run in httpx.get(f"{url}/api/v1/runs", timeout=10).json()}


def loss_steps(url: str, run: str) -> list[int]:
    """The steps of the run's stored ``train.loss``, through the query API."""
    params = {"name": "train.loss", "run": run}
    found = httpx.get(f"{url}/api/v1/series", params=params, timeout=10).json()
    assert len(found) == 1, f"run {run}: train.loss series {found}"
    raw = httpx.get(f"{url}/api/v1/query/raw", params={"series": found[0]["id"]}, timeout=10)
    steps: list[int] = raw.json()["step"]
    return steps


def user_env(collector: Collector, spool: Path) -> dict[str, Any]:
    """A shell's environment pointed at the collector (as `stepwatch run` does), offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    env |= {"STEPWATCH_SERVER": collector.url, "STEPWATCH_DIR": str(spool)}
    return env | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_the_readme_has_its_snippets() -> None:
    assert len(SNIPPETS) >= 5


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda block: f"line{block.line}")
def test_the_snippet_runs_as_pasted(snippet: Block, collector: Collector, tmp_path: Path) -> None:
    before = run_ids(collector.url)
    script = tmp_path / "snippet.py"
    script.write_text(snippet.text)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=user_env(collector, tmp_path / "spool"),
        capture_output=True,
        text=True,
        timeout=RUN_S,
    )
    assert done.returncode == 0, f"README.md:{snippet.line}:\n{done.stderr}"
    if not any(call in snippet.text for call in STARTS_RUN):
        return
    started = run_ids(collector.url) - before
    assert started, f"README.md:{snippet.line}: no run reached the collector"
    for run in started:
        meta = httpx.get(f"{collector.url}/api/v1/runs/{run}", timeout=10).json()
        assert meta["status"] == "finished", meta
        steps = loss_steps(collector.url, run)
        assert steps and min(steps) >= 0, f"run {run}: train.loss at steps {steps}"
