"""`stepwatch top` as a user runs it: a real process against a real collector."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from typing import Any

import httpx

from .conftest import PLANNED, STEPS, Pushed

EXIT_TIMEOUT_S = 30.0


def top(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    env["COLUMNS"] = "100"
    return subprocess.run(
        [sys.executable, "-m", "stepwatch.cli", "top", *args],
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        env=env,
        **kwargs,
    )


def test_once_prints_one_frame(pushed: Pushed) -> None:
    done = top(pushed.run_id, "--server", pushed.url, "--once")
    assert done.returncode == 0, done.stderr
    assert pushed.name in done.stdout and f"step {STEPS - 1} / {PLANNED:,}" in done.stdout
    assert "node0" in done.stdout and "node1" in done.stdout and "gpu_hot" in done.stdout


def test_without_a_run_it_watches_the_latest_running_one(pushed: Pushed) -> None:
    done = top("--server", pushed.url, "--once")
    assert done.returncode == 0, done.stderr
    assert pushed.run_id in done.stdout and "finished later" not in done.stdout


def test_unknown_run_is_one_line_of_error(pushed: Pushed) -> None:
    done = top("nope", "--server", pushed.url, "--once")
    assert done.returncode == 1
    assert "no run 'nope'" in done.stderr and "Traceback" not in done.stderr


def test_token(collector_factory: Any) -> None:
    collector = collector_factory(auth=True)
    run = {"id": "tok-run", "name": "behind a token", "planned_total_steps": 10}
    httpx.post(f"{collector.url}/api/v1/runs", json=run, headers=collector.headers)
    refused = top("--server", collector.url, "--once")
    assert refused.returncode == 1 and "needs a token" in refused.stderr
    done = top("--server", collector.url, "--token", collector.token, "--once")
    assert done.returncode == 0, done.stderr
    assert "behind a token" in done.stdout and "no open alerts" in done.stdout


def _as_a_terminal_does() -> None:
    """Ctrl-C as a shell gives it: a test run started in the background (``cmd &``) ignores
    SIGINT, and a child would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """`stepwatch top` live in a pseudo-terminal, as a person at a keyboard sees it."""

    def __init__(self, *args: str) -> None:
        self.fd, child = pty.openpty()
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
        env |= {"COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}
        cmd = [sys.executable, "-m", "stepwatch.cli", "top", *args]
        self.proc = subprocess.Popen(
            cmd, stdin=child, stdout=child, stderr=child, env=env, preexec_fn=_as_a_terminal_does
        )
        os.close(child)
        self.seen = b""

    def wait_for(self, text: str) -> None:
        """Read the screen until ``text`` shows (or the process ends, or time runs out)."""
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while text.encode() not in self.seen and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    break
        assert text.encode() in self.seen, self.seen.decode(errors="replace")[-2000:]

    def _drain(self, timeout_s: float) -> None:
        """Keep what the process printed, waiting up to ``timeout_s`` for the first of it."""
        while select.select([self.fd], [], [], timeout_s)[0]:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the child closed the terminal
                return
            if not chunk:
                return
            self.seen += chunk
            timeout_s = 0

    def exit_code(self) -> int:
        """Wait for the process to end, reading its screen meanwhile (a view whose terminal
        nobody reads blocks in its next frame, before it sees a key), then keep the rest."""
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        try:
            while self.proc.poll() is None and time.monotonic() < deadline:
                self._drain(0.1)
            return self.proc.wait(timeout=0)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._drain(0)
            os.close(self.fd)


def test_q_quits_the_live_view(pushed: Pushed) -> None:
    term = Terminal(pushed.run_id, "--server", pushed.url, "--interval", "0.5")
    term.wait_for(pushed.name)
    term.wait_for("q quits")
    os.write(term.fd, b"q")
    assert term.exit_code() == 0


def test_ctrl_c_quits_cleanly(pushed: Pushed) -> None:
    term = Terminal(pushed.run_id, "--server", pushed.url, "--interval", "0.5")
    term.wait_for("q quits")
    term.proc.send_signal(signal.SIGINT)
    assert term.exit_code() == 0
    assert b"Traceback" not in term.seen


def test_a_lost_collector_leaves_the_last_frame_and_says_why(collector_factory: Any) -> None:
    collector = collector_factory()
    run = {"id": "lost-run", "name": "soon unreachable", "planned_total_steps": 10}
    httpx.post(f"{collector.url}/api/v1/runs", json=run).raise_for_status()
    term = Terminal("--server", collector.url, "--interval", "0.2")
    term.wait_for("soon unreachable")
    collector.stop()
    term.wait_for("stale: cannot reach the collector")
    os.write(term.fd, b"q")
    assert term.exit_code() == 0
