"""`stepwatch run` to an HTTPS collector: the agent and the wrapped command both trust its CA."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
from _certs import Certs

TRAIN = textwrap.dedent(
    """
    import stepwatch
    run = stepwatch.init()
    for step in range(5):
        run.log({"loss": float(step)}, step=step)
    """
)


def test_the_command_inherits_the_ca_file_given_to_stepwatch_run(
    tls_server: Any, certs: Certs, tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    shutil.copy(certs.ca, tmp_path / "ca.pem")  # relative: the command may run elsewhere
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    args = ["run", "--server", tls_server.url, "--ca-file", "ca.pem", "--gpu", "none"]
    done = subprocess.run(
        [sys.executable, "-m", "stepwatch.cli", *args, "--run-id", "r-run-tls"]
        + ["--dir", str(tmp_path / "spool"), "--", sys.executable, "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    with httpx.Client(base_url=tls_server.url, verify=tls_server.tls.context()) as client:
        series = client.get("/api/v1/series", params={"run": "r-run-tls"}).json()
        run = client.get("/api/v1/runs/r-run-tls").json()
    names = {s["name"] for s in series}
    assert {"train.loss", "host.mem_used_bytes"} <= names  # the command's, the agent's
    assert run["status"] == "finished"
