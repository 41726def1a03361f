"""Running remediations off the detector thread: one worker thread, and a process runner that
kills the whole process group on timeout and keeps the tails of what it printed."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .._worker import QueueWorker

__all__ = ["Outcome", "Runner", "run_process"]

log = logging.getLogger("stepwatch.act")

#: How much of the end of stdout and of stderr an action keeps.
TAIL_CHARS = 8000
#: Between SIGTERM to the process group and SIGKILL.
GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a process ended: its exit code (None when it could not start), the tails of its
    output, how long it took, and whether it was killed for running too long (or at stop)."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    error: str = ""


def _tail(f: IO[bytes], chars: int) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - 4 * chars))
    return f.read().decode("utf-8", "replace")[-chars:]


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the group the process leads, then SIGKILL to what is left of it (children
    that ignored SIGTERM or outlived their parent)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_process(
    argv: Sequence[str],
    timeout_s: float,
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    stop: threading.Event | None = None,
    grace_s: float = GRACE_S,
    tail_chars: int = TAIL_CHARS,
) -> Outcome:
    """Run ``argv`` (no shell) in a process group of its own; past ``timeout_s``, or once
    ``stop`` is set, the whole group is killed."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=cwd,
                env=None if env is None else dict(env),
                start_new_session=True,
            )
        except OSError as exc:
            return Outcome(None, "", "", time.monotonic() - started, error=str(exc))
        timed_out, error = False, ""
        while True:
            left = timeout_s - (time.monotonic() - started)
            try:
                proc.wait(min(max(left, 0.0), 0.1))
                break
            except subprocess.TimeoutExpired:
                stopped = stop is not None and stop.is_set()
                if left <= 0 or stopped:
                    timed_out = True
                    error = (
                        "stopped with the collector" if stopped else f"killed after {timeout_s:g} s"
                    )
                    _kill_group(proc, grace_s)
                    proc.wait()
                    break
        return Outcome(
            proc.returncode,
            _tail(out, tail_chars),
            _tail(err, tail_chars),
            time.monotonic() - started,
            timed_out,
            error,
        )


class Runner:
    """One worker thread that runs submitted jobs in order; ``stopping`` is set at stop so a
    running process is cut short."""

    def __init__(self, name: str = "stepwatch-act") -> None:
        self._worker: QueueWorker[Callable[[], object]] = QueueWorker(
            lambda job: job(), name=name, failed="a remediation job failed", log=log, drain=False
        )

    @property
    def stopping(self) -> threading.Event:
        return self._worker.stop_event

    def start(self) -> Runner:
        self._worker.start()
        return self

    def submit(self, job: Callable[[], object]) -> None:
        """Run ``job`` on the worker thread after those before it."""
        self._worker.put(job)

    def stop(self) -> None:
        """Cut the running job's process short, skip the rest, end the thread."""
        self._worker.stop()
