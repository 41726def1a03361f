"""`stepwatch run -- CMD` as a user runs it: a real subprocess, a real collector, a real child."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

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
    said = err.decode().splitlines()
    url = _collector_url(said)
    assert f"stepwatch: run own-1 on {url}/#/overview?run=own-1" in said
    assert said[-1] == (
        "stepwatch: run own-1 finished; to look at it again: stepwatch server --store "
        f"{tmp_path / 'own.duckdb'}, then open http://127.0.0.1:7070/#/overview?run=own-1"
    )
    with Store(tmp_path / "own.duckdb") as store:
        run = store.get_run("own-1")
        assert run is not None and run.status == "finished"
        (loss,) = store.series("train.loss", {"run": "own-1"})
        assert store.raw(loss.id)["value"].tolist() == [1.0, 0.5, 1 / 3, 0.25, 0.2]


def _collector_url(said: list[str]) -> str:
    """The URL of the collector ``stepwatch run`` started, from what it said."""
    for line in said:
        if line.startswith("stepwatch: collector at "):
            return line.split()[3].rstrip("/")
    raise AssertionError("\n".join(said))


def test_its_collector_takes_port_7070_or_says_why_not(tmp_path: Path) -> None:
    """Port 7070 when free (another test may hold it meanwhile: then it must say so)."""
    code, _, err = _stepwatch_run(
        tmp_path, "--store", str(tmp_path / "s.duckdb"), "--gpu", "none", "--", "true"
    )
    assert code == 0, err.decode()
    said = err.decode().splitlines()
    if _collector_url(said) != "http://127.0.0.1:7070":
        assert said[0].startswith("stepwatch: port 7070 is in use; the collector listens on ")


def test_when_port_7070_is_taken_its_collector_listens_elsewhere_and_says_so(
    tmp_path: Path,
) -> None:
    with contextlib.ExitStack() as held:
        with contextlib.suppress(OSError):  # held by another program already: taken all the same
            held.enter_context(socket.create_server(("127.0.0.1", 7070)))
        code, _, err = _stepwatch_run(
            tmp_path, "--store", str(tmp_path / "s.duckdb"), "--gpu", "none", "--", "true"
        )
    assert code == 0, err.decode()
    said = err.decode().splitlines()
    url = _collector_url(said)
    assert said[0] == f"stepwatch: port 7070 is in use; the collector listens on {url} instead"
    assert url != "http://127.0.0.1:7070"


def test_keep_serving_serves_the_run_until_ctrl_c_and_its_link_opens_the_overview(
    tmp_path: Path,
) -> None:
    with _start(
        tmp_path,
        *("--store", str(tmp_path / "kept.duckdb"), "--gpu", "none", "--run-id", "kept-1"),
        *("--keep-serving", "--name", "kept run", "--", sys.executable, "train.py", "0", "ok"),
    ) as proc:
        try:
            said = _said_until(proc, "until Ctrl-C")
            link = said[-1].split(" serving ")[1].split()[0]
            assert link == f"{_collector_url(said)}/#/overview?run=kept-1"
            assert said[-1] == f"stepwatch: run kept-1 finished; serving {link} until Ctrl-C"
            _open_in_a_browser(link, "kept run")
        finally:  # served until Ctrl-C, whatever the test found
            proc.send_signal(signal.SIGINT)
            _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest.decode()
    assert rest.decode().splitlines()[-1].startswith("stepwatch: run kept-1 finished; to look")
    with Store(tmp_path / "kept.duckdb") as store:  # the collector closed it on the way out
        run = store.get_run("kept-1")
        assert run is not None and run.status == "finished"


def _said_until(proc: subprocess.Popen[bytes], words: str) -> list[str]:
    """The lines ``proc`` wrote on stderr up to the first with ``words``."""
    assert proc.stderr is not None
    said = [proc.stderr.readline().decode().rstrip("\n")]
    while words not in said[-1]:
        assert said[-1] or proc.poll() is None, "\n".join(said)
        said.append(proc.stderr.readline().decode().rstrip("\n"))
    return said


def _open_in_a_browser(link: str, name: str) -> None:
    """Open ``link`` in Chromium: the overview of the run called ``name`` shows."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page()
            page.goto(link)
            expect(page.locator('[data-view="overview"]')).to_be_visible(timeout=30_000)
            expect(page.locator("body")).to_contain_text(name, timeout=30_000)
        finally:
            browser.close()


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
