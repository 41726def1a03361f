"""One optimizer step's timeline and the queue that logs it once the device has finished it.

The timeline marks where the previous step ended, where compute started (the
first forward, the batch start), the collectives inside, and where the step
ended. On a GPU those marks and the fetched tensors are only readable a step or
so later; the recorder keeps them until ``ready`` and then makes one ``run.log``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..sdk import Run
from ._device import Device, Mark
from ._grads import Labelled

__all__ = ["Recorder", "StepMarks", "Timeline"]

#: Past this many unread steps the recorder waits for the oldest (a device far behind).
MAX_PENDING = 64


@dataclass(slots=True)
class StepMarks:
    """Marks of one step: previous end (None for the first), compute start, end, collectives."""

    resume: Mark | None
    start: Mark | None
    end: Mark
    comms: list[tuple[Mark, Mark, bool]] = field(default_factory=list)
    timed_comm: bool = False

    def timings(self, device: Device) -> dict[str, float]:
        """``train.*_time_s`` of the step (data time after a previous step, comm once timed)."""
        start = self.start if self.start is not None else self.resume
        if start is None:
            return {}
        comm = inside = 0.0
        for begin, end, in_compute in self.comms:
            took = device.seconds(begin, end)
            comm += took
            inside += took if in_compute or self.start is None else 0.0
        out = {"train.compute_time_s": max(0.0, device.seconds(start, self.end) - inside)}
        first = start if self.resume is None else self.resume
        out["train.step_time_s"] = device.seconds(first, self.end)
        if self.resume is not None and self.start is not None:
            out["train.data_time_s"] = device.seconds(self.resume, self.start)
        if self.timed_comm:
            out["train.comm_time_s"] = comm
        return out


class Timeline:
    """Marks the phases of the step in progress; ``end`` hands them over and starts the next."""

    def __init__(self, device: Device) -> None:
        self._device = device
        self._resume: Mark | None = None
        self._start: Mark | None = None
        self._comms: list[tuple[Mark, Mark, bool]] = []
        self._timed_comm = False

    def begin(self) -> None:
        """Compute starts (the first call of a step counts)."""
        if self._start is None:
            self._start = self._device.mark()

    def resume(self) -> None:
        """The wait for the next step starts now (after a step, or after a pause to leave out)."""
        self._resume = self._device.mark()

    @contextmanager
    def comm(self) -> Iterator[None]:
        """Time a collective; from the first one on, every step reports ``train.comm_time_s``."""
        start, in_compute = self._device.mark(), self._start is not None
        try:
            yield
        finally:
            self._comms.append((start, self._device.mark(), in_compute))
            self._timed_comm = True

    def end(self) -> StepMarks:
        """The step ends now; the next one's data wait starts here."""
        end = self._device.mark()
        marks = StepMarks(self._resume, self._start, end, self._comms, self._timed_comm)
        self._resume, self._start, self._comms = end, None, []
        return marks


@dataclass(slots=True)
class _Pending:
    step: int
    marks: StepMarks | None
    values: dict[str, object]
    labelled: Labelled
    tokens: float | None
    done: Mark


class Recorder:
    """Logs each submitted step once its marks and fetched values are readable, in order."""

    def __init__(self, run: Run, device: Device) -> None:
        self._run, self._device = run, device
        self._pending: deque[_Pending] = deque()

    def submit(
        self,
        step: int,
        marks: StepMarks | None,
        values: dict[str, object],
        labelled: Labelled | None = None,
        tokens: float | None = None,
    ) -> None:
        """Queue a step (starting the copies of its device tensors) and log the ready ones.

        The device's allocator counters, when it has them, are added with its labels.
        """
        device = self._device
        fetch = device.fetch
        fetched = {name: fetch(value) for name, value in values.items()}
        more = [({n: fetch(v) for n, v in vals.items()}, labels) for vals, labels in labelled or ()]
        memory = device.memory()
        if memory is not None:
            more.append(memory)
        item = _Pending(step, marks, fetched, more, tokens, device.mark())
        if not self._pending and device.ready(item.done):
            self._log(item)  # the host's case: nothing to queue
        else:
            self._pending.append(item)
            self.drain()

    def drain(self, wait: bool = False) -> None:
        """Log the ready steps; ``wait`` for all of them (and, when too many queue, the oldest)."""
        pending, device = self._pending, self._device
        if wait and pending:
            device.wait(pending[-1].done)
        while pending:
            if len(pending) > MAX_PENDING:
                device.wait(pending[0].done)
            elif not device.ready(pending[0].done):
                return
            self._log(pending.popleft())

    def _log(self, item: _Pending) -> None:
        if self._run.finished:
            return
        values = item.values  # the recorder's own dict (built in submit)
        if item.marks is not None:
            values.update(item.marks.timings(self._device))
            took = values.get("train.step_time_s")
            if item.tokens is not None and isinstance(took, float) and took > 0:
                values["train.tokens_per_s"] = item.tokens / took
        if values:
            self._run.log(values, step=item.step)
        for more, labels in item.labelled:
            self._run.log(more, step=item.step, labels=labels)
