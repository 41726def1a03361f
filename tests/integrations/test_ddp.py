"""watch() under torchrun: four gloo ranks log their step, compute and comm times to one run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import find_series, stored

RANKS, STEPS = 4, 5
SCRIPT = Path(__file__).with_name("_ddp_train.py")


def test_every_rank_reports_its_times_and_rank_0_the_curves(server: Any, tmp_path: Path) -> None:
    env = os.environ | {
        "STEPWATCH_SERVER": server.url,
        "STEPWATCH_RUN_ID": "r-ddp",
        "STEPWATCH_DIR": str(tmp_path / "spool"),
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", str(RANKS), str(SCRIPT), str(STEPS)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = list(range(STEPS))
    for rank in range(RANKS):
        for name in ("train.step_time_s", "train.compute_time_s", "train.comm_time_s"):
            values = stored(server.url, name, "r-ddp", rank=rank)
            assert sorted(values) == steps and all(v > 0 for v in values.values()), (name, rank)
        assert sorted(stored(server.url, "train.data_time_s", "r-ddp", rank=rank)) == steps[1:]
    assert sorted(stored(server.url, "train.loss", "r-ddp", rank=0)) == steps
    assert sorted(stored(server.url, "train.grad_norm", "r-ddp", rank=0)) == steps
    assert sorted(stored(server.url, "train.tokens_per_s", "r-ddp", rank=0)) == steps
    for rank in range(1, RANKS):
        for name in ("train.loss", "train.grad_norm"):
            assert find_series(server.url, name, "r-ddp", rank=rank) == []
