"""`stepwatch run -- CMD` as a user runs it: a real subprocess, a real collector, a real child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.collect import GpuUnavailable, open_gpu
from stepwatch.store import Store

TRAIN = textwrap.dedent(
    """
    import sys, time
    import stepwatch
    run = stepwatch.init()
    for step in range(5):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        print(f"step {step} done", flush=True)
        time.sleep(0.05)
    print("a warning on stderr", file=sys.stderr, flush=True)
    time.sleep(float(sys.argv[1]))
    if sys.argv[2] == "fail":
        raise RuntimeError("loss exploded")
    """
)


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    """``stepwatch run ARGS`` started in ``tmp_path`` (beside train.py), output piped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    (tmp_path / "train.py").write_text(TRAIN)
    return subprocess.Popen(
        [sys.executable, "-m", "stepwatch.cli", "run", "--dir", str(tmp_path / "spool"), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _stepwatch_run(tmp_path: Path, *args: str) -> tuple[int, bytes, bytes]:
    """Exit code, stdout and stderr of ``stepwatch run ARGS``."""
    with _start(tmp_path, *args) as proc:
        out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _get(url: str, path: str, **params: Any) -> Any:
    with httpx.Client(base_url=url, timeout=10) as client:
        response = client.get(path, params=params)
        response.raise_for_status()
        return response.json()


def _run_id(stderr: bytes) -> str:
    for line in stderr.decode().splitlines():
        if line.startswith("stepwatch: run ") and " on " in line:
            return line.split()[2]
    raise AssertionError(f"no run id in:\n{stderr.decode()}")


def test_a_failing_command_is_recorded_whole(server: Any, tmp_path: Path) -> None:
    code, out, err = _stepwatch_run(
        tmp_path,
        *("--server", server.url, "--gpu", "fake:2", "--interval", "0.2", "--name", "t1"),
        *("--", sys.executable, "train.py", "0.5", "fail"),
    )
    assert code == 1, err.decode()
    assert b"step 4 done" in out and b"RuntimeError: loss exploded" in err
    run_id = _run_id(err)
    run = _get(server.url, f"/api/v1/runs/{run_id}")
    assert (run["status"], run["name"]) == ("failed", "t1")
    assert run["config"]["command"][-2:] == ["0.5", "fail"]
    names = {s["name"] for s in _get(server.url, "/api/v1/series", run=run_id)}
    assert {"train.loss", "host.cpu_pct", "host.mem_used_bytes", "gpu.temp_c"} <= names
    assert {"host.proc_rss_bytes", "stepwatch.heartbeat_s"} <= names
    gpus = {s["labels"]["gpu"] for s in _get(server.url, "/api/v1/series", name="gpu.temp_c")}
    assert gpus == {"0", "1"}
    events = _get(server.url, "/api/v1/events", run=run_id)
    tracebacks = [e for e in events if e["data"].get("traceback")]
    assert len(tracebacks) == 1 and tracebacks[0]["data"]["exception"] == "RuntimeError"
    assert tracebacks[0]["labels"]["stream"] == "stderr"
    lines = [e["text"] for e in events if e["kind"] == "log" and e["labels"]["stream"] == "stdout"]
    assert lines == [f"step {i} done" for i in range(5)]
    (exit_event,) = [e for e in events if e["kind"] == "process_exit"]
    assert exit_event["data"] == {"returncode": 1, "signal": None}


def test_a_signal_to_stepwatch_run_reaches_the_command(server: Any, tmp_path: Path) -> None:
    with _start(
        tmp_path,
        *("--server", server.url, "--gpu", "none", "--run-id", "sig-1"),
        *("--", sys.executable, "train.py", "60", "ok"),
    ) as proc:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while b"step 4 done" not in proc.stdout.readline():
            assert time.monotonic() < deadline and proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert _get(server.url, "/api/v1/runs/sig-1")["status"] == "killed"


def test_without_a_server_it_starts_its_own_collector(tmp_path: Path) -> None:
    code, _, err = _stepwatch_run(
        tmp_path,
        *("--store", str(tmp_path / "own.duckdb"), "--gpu", "none", "--run-id", "own-1"),
        *("--", sys.executable, "train.py", "0", "ok"),
    )
    assert code == 0, err.decode()
    with Store(tmp_path / "own.duckdb") as store:
        run = store.get_run("own-1")
        assert run is not None and run.status == "finished"
        (loss,) = store.series("train.loss", {"run": "own-1"})
        assert store.raw(loss.id)["value"].tolist() == [1.0, 0.5, 1 / 3, 0.25, 0.2]


def test_asking_for_a_gpu_that_is_not_there_is_a_clear_error(tmp_path: Path) -> None:
    try:
        gpu, _ = open_gpu("nvml")
    except GpuUnavailable:
        pass
    else:
        assert gpu is not None
        gpu.close()
        pytest.skip("this machine has a working NVML")
    code, out, err = _stepwatch_run(
        tmp_path, "--gpu", "nvml", "--", sys.executable, "-c", "print('never runs')"
    )
    assert code == 1 and b"never runs" not in out
    assert b"Error: " in err and b"NVML" in err and b"Traceback" not in err


def test_torchrun_ranks_join_the_run_with_their_rank_labels(server: Any, tmp_path: Path) -> None:
    script = Path(__file__).parents[1] / "integrations" / "_ddp_train.py"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    code, _, err = _stepwatch_run(
        tmp_path,
        *("--server", server.url, "--gpu", "none", "--run-id", "ddp-1"),
        *("--", *torchrun, "--nproc_per_node", "2", str(script), "3"),
    )
    assert code == 0, err.decode()[-3000:]
    assert _get(server.url, "/api/v1/runs/ddp-1")["status"] == "finished"
    series = _get(server.url, "/api/v1/series", name="train.step_time_s", run="ddp-1")
    assert sorted(s["labels"]["rank"] for s in series) == ["0", "1"]
    assert all(s["labels"]["world_size"] == "2" for s in series)
