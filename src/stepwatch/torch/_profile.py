"""``profile(optimizer, run, steps=N)``: torch.profiler over the next N optimizer steps, the
trace uploaded to the collector with the run, rank and steps.

The profiler follows its schedule on the optimizer's step hook (a step or two of warm-up,
then N active steps), so the loop is not changed. Once the active steps are over the trace
is written, compressed and uploaded on a thread of its own: training pays for the profiled
steps only. An upload the collector cannot take yet (unreachable, busy, the run's record still
on its way) is tried again for a minute; without a collector, or after that, the trace stays
in a file, said in the log.
"""

from __future__ import annotations

import gzip
import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import torch
from torch.profiler import ProfilerActivity, schedule

from ..sdk import Run, current_run
from ..spool import Backoff, HttpClient, TransportError

__all__ = ["Profile", "profile"]

log = logging.getLogger("stepwatch.torch")

#: How long an upload is tried again while the collector cannot take it yet.
UPLOAD_FOR_S = 60.0
#: Besides a retryable answer, one that may change: the run's record is on its way.
_NOT_YET = 404


class Profile:
    """One capture in progress; ``done`` is set once the trace is uploaded (or kept)."""

    def __init__(
        self, run: Run, optimizer: torch.optim.Optimizer, steps: int, wait: int, warmup: int
    ) -> None:
        if steps < 1 or wait < 0 or warmup < 0:
            raise ValueError("profile: steps must be >= 1, wait and warmup >= 0")
        self.run, self.steps = run, steps
        self.done = threading.Event()
        #: Where the trace went: the collector's answer (its id...) or the file kept.
        self.uploaded: dict[str, Any] | None = None
        self.kept: Path | None = None
        self.first_step: int | None = None
        self._left = wait + warmup
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self._profiler = torch.profiler.profile(
            activities=activities,
            schedule=schedule(wait=wait, warmup=warmup, active=steps, repeat=1),
            on_trace_ready=self._ready,
            record_shapes=False,
            with_stack=False,
        )
        self._profiler.start()
        self._hook = optimizer.register_step_post_hook(self._stepped)

    def _stepped(self, *_: Any) -> None:
        if self._left == 0 and self.first_step is None:
            self.first_step = self.run.current_step
        self._left -= 1
        self._profiler.step()

    def _ready(self, prof: Any) -> None:
        """The active steps are over: stop, and write and ship the trace off this thread."""
        self._hook.remove()
        threading.Thread(target=self._ship, args=(prof,), name="stepwatch-profile").start()

    def _ship(self, prof: Any) -> None:
        try:
            self._profiler.stop()
            trace = self._write(prof)
            self._upload(trace)
        except Exception:
            log.exception("stepwatch: the profile of run %s could not be written", self.run.id)
        finally:
            self.done.set()

    def _write(self, prof: Any) -> Path:
        """The trace, gzip-compressed, in a file of its own."""
        folder = Path(tempfile.mkdtemp(prefix="stepwatch-profile-"))
        raw = folder / "trace.json"
        prof.export_chrome_trace(str(raw))
        packed = folder / "trace.json.gz"
        with raw.open("rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()
        return packed

    def _upload(self, trace: Path) -> None:
        run = self.run
        if run.server is None:
            self.kept = trace
            log.warning("stepwatch: no collector to send the profile to; it is in %s", trace)
            return
        query = {"steps": self.steps, "rank": run.labels.get("rank", "0")}
        if self.first_step is not None:
            query["first_step"] = self.first_step
        path = f"/api/v1/runs/{quote(run.id, safe='')}/profiles?{urlencode(query)}"
        body, backoff = trace.read_bytes(), Backoff(base_s=0.5, cap_s=5.0)
        deadline = time.monotonic() + UPLOAD_FOR_S
        client = HttpClient(run.server, run.token, tls=run.tls, timeout_s=60.0)
        try:
            while True:
                try:
                    answer = client.post(path, body, "application/gzip")
                except TransportError as exc:
                    answer, why = None, str(exc)
                if answer is not None and answer.status == 201:
                    self.uploaded = answer.body
                    shutil.rmtree(trace.parent, ignore_errors=True)
                    return
                if answer is not None:
                    why = f"{answer.status}: {answer.body.get('error', '')}"
                again = answer is None or answer.retryable or answer.status == _NOT_YET
                if not again or time.monotonic() >= deadline:
                    break
                time.sleep(backoff.next())
        finally:
            client.close()
        self.kept = trace
        log.warning("stepwatch: the profile was not taken (%s); it is in %s", why, trace)


def profile(
    optimizer: torch.optim.Optimizer,
    run: Run | None = None,
    *,
    steps: int = 5,
    wait: int = 1,
    warmup: int = 1,
) -> Profile:
    """Profile the next ``steps`` steps of ``optimizer`` (after ``wait`` + ``warmup``) and
    upload the trace to ``run``'s collector (default: the current run). Returns at once."""
    chosen = run or current_run()
    if chosen is None:
        raise RuntimeError("stepwatch.torch.profile needs a run: call stepwatch.init() first")
    return Profile(chosen, optimizer, steps, wait, warmup)
