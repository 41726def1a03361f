"""Running a process for a playbook: output tails, exit codes, and a timeout that kills the
whole process group (children included)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from stepwatch.act import Runner, run_process

#: A parent that starts a child, says so on both streams, then sleeps; both outlive any test.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
print("started", flush=True)
print("warming up", file=sys.stderr, flush=True)
time.sleep(600)
"""


def _gone(pid: int, wait_s: float = 10.0) -> bool:
    """The process has ended (a zombie left for init counts as ended)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_exit_code_and_the_tails_of_both_streams_are_kept() -> None:
    script = "import sys; print('x' * 50 + 'END'); print('bad', file=sys.stderr); sys.exit(3)"
    outcome = run_process([sys.executable, "-c", script], 30.0, tail_chars=10)
    assert (outcome.exit_code, outcome.timed_out, outcome.error) == (3, False, "")
    assert (outcome.stdout, outcome.stderr) == ("xxxxxxEND\n", "bad\n")


def test_a_program_that_cannot_start_is_an_outcome_not_an_exception(tmp_path: Path) -> None:
    outcome = run_process([str(tmp_path / "missing")], 30.0)
    assert outcome.exit_code is None and "missing" in outcome.error


def test_past_its_timeout_the_whole_process_group_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    outcome = run_process([sys.executable, "-c", PARENT, str(pid_file)], timeout_s=1.5, grace_s=0.5)
    assert outcome.timed_out and outcome.exit_code is not None and outcome.exit_code < 0
    assert outcome.error == "killed after 1.5 s"
    assert (outcome.stdout, outcome.stderr) == ("started\n", "warming up\n")
    assert _gone(int(pid_file.read_text())), "the child outlived the timeout"


def test_stopping_the_runner_cuts_a_running_process_short(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    runner = Runner().start()
    done: list[object] = []
    started = threading.Event()

    def job() -> None:
        started.set()
        done.append(
            run_process([sys.executable, "-c", PARENT, str(pid_file)], 600.0, stop=runner.stopping)
        )

    runner.submit(job)
    assert started.wait(30)
    while not pid_file.exists() or not pid_file.read_text():
        time.sleep(0.05)
    runner.submit(lambda: done.append("never"))  # skipped: the runner is stopping
    runner.stop()
    (outcome,) = done
    assert getattr(outcome, "error", None) == "stopped with the collector"
    assert _gone(int(pid_file.read_text()))
