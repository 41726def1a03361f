"""Follow a log file like ``tail -F``: new lines become log events, rotation loses none.

Rotation by rename (logrotate's default) finishes the old file before the new
one; copytruncate (the file shrinks) starts again at 0; a missing file is
waited for and reported once as a ``log_source_error`` event. With a format to parse, the
training metrics its lines print become samples at their steps as well (``MetricLines``).
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..model import Event
from ._lines import LineBuffer, LineGrouper
from ._log_metrics import MetricLines, StepMetrics
from ._source import Reading, Sample

__all__ = ["LogTail"]

#: How far back from the end a tail started "at the end" looks for the start of the last line.
_LAST_LINE_LOOKBACK = 65536


class LogTail:
    """A source (``logs``) that returns the lines appended to ``path`` since the last read.

    Args:
        path: the log file; it need not exist yet.
        interval_s: seconds between reads.
        from_start: read what the file holds already, instead of starting at its end.
        labels: labels every event carries, besides ``path``.
        clock: wall-clock time, for events that ``flush`` emits.
        max_bytes_per_read: bytes one ``read`` takes at most; the rest waits for the next.
        quiet_s: seconds after which a traceback that stopped mid-way is emitted as it is.
        parse: a format of ``LOG_FORMATS`` to read training metrics from the lines in, or None.
    """

    name = "logs"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        interval_s: float = 1.0,
        from_start: bool = False,
        labels: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        max_bytes_per_read: int = 4 << 20,
        quiet_s: float = 2.0,
        parse: str | None = None,
    ) -> None:
        if max_bytes_per_read <= 0:
            raise ValueError(f"max_bytes_per_read must be > 0, got {max_bytes_per_read}")
        self.path = Path(path)
        self.interval_s = interval_s
        self._clock = clock
        self._budget = max_bytes_per_read
        self._labels = {**(labels or {}), "path": str(self.path)}
        self._grouper = LineGrouper(self._labels, quiet_s=quiet_s)
        self._lines = LineBuffer()
        self._metrics = MetricLines(parse) if parse is not None else None
        self._found: list[StepMetrics] = []  # metrics read since the last reading
        self._file: io.FileIO | None = None
        self._identity: tuple[int, int] | None = None
        self._trouble: str | None = None  # the problem last reported, reported once
        self._open(at_end=not from_start)

    def read(self, now: float) -> Reading:
        """Read what was appended since the last call, following rotation and truncation."""
        events: list[Event] = []
        if self._file is None and (exc := self._open(at_end=False)) is not None:
            events.extend(self._report(now, exc))
        if self._file is not None:
            try:
                events.extend(self._follow(now))
            except OSError as exc:
                events.extend(self._report(now, exc))
                self._close_file()
        events.extend(self._grouper.poll(now))
        return Reading(samples=self._samples(), events=events)

    def flush(self) -> Reading:
        """Read what is left and emit the unfinished last line and any held traceback."""
        now = self._clock()
        reading = self.read(now)
        if (rest := self._lines.rest()) is not None:
            reading.events.extend(self._grouper.feed(rest, now))
        reading.events.extend(self._grouper.flush())
        if self._metrics is not None:
            self._found += self._metrics.finish()
            reading.samples.extend(self._samples())
        return reading

    def close(self) -> None:
        """Close the file; what ``flush`` would have returned is dropped."""
        self._close_file()

    def _open(self, *, at_end: bool) -> OSError | None:
        """Open ``path``; the error instead when it cannot be (missing, unreadable)."""
        try:
            handle = open(self.path, "rb", buffering=0)
        except OSError as exc:
            return exc
        stat = os.fstat(handle.fileno())
        self._file, self._identity = handle, (stat.st_dev, stat.st_ino)
        if at_end:
            handle.seek(_start_of_last_line(handle, stat.st_size))
        return None

    def _report(self, now: float, exc: OSError) -> list[Event]:
        """One ``log_source_error`` event per new problem, none while the same one lasts."""
        reason = exc.strerror or type(exc).__name__
        if reason == self._trouble:
            return []
        self._trouble = reason
        text = f"cannot read log file {self.path}: {reason}; waiting for it"
        data = {"level": "warning", "error": reason}
        return [
            Event(ts=now, kind="log_source_error", text=text, labels=dict(self._labels), data=data)
        ]

    def _follow(self, now: float) -> list[Event]:
        """Read up to the budget; at the end of the file, look for rotation or truncation."""
        assert self._file is not None
        events, budget = self._drain(now, self._budget)
        if budget == 0:
            return events
        try:
            stat = os.stat(self.path)
        except FileNotFoundError as exc:
            return events + self._report(now, exc)  # keep the open file: its writer may too
        position = self._file.tell()
        if (stat.st_dev, stat.st_ino) != self._identity:
            more, budget = self._drain(now, budget)  # what the writer added before it moved on
            events += more
            if budget > 0:
                events += self._switch(now, budget)
        elif stat.st_size < position:
            events += self._end_line(now)
            self._file.seek(0)
            events += self._drain(now, budget)[0]
        self._trouble = None
        return events

    def _drain(self, now: float, budget: int) -> tuple[list[Event], int]:
        """Feed the file's new bytes until its end or the budget; return what budget is left."""
        assert self._file is not None
        events: list[Event] = []
        while budget > 0:
            chunk = self._file.read(min(budget, 1 << 20))
            if not chunk:
                break
            budget -= len(chunk)
            if self._metrics is not None:
                self._found += self._metrics.push(chunk)
            for line in self._lines.push(chunk):
                events.extend(self._grouper.feed(line, now))
        return events, budget

    def _switch(self, now: float, budget: int) -> list[Event]:
        """Leave a rotated-away file for the new one at ``path``, read from its start."""
        events = self._end_line(now)
        self._close_file()
        if self._open(at_end=False) is None:
            events += self._drain(now, budget)[0]
        return events

    def _end_line(self, now: float) -> list[Event]:
        """Emit the unfinished last line of a file we are leaving, so it is not lost."""
        if self._metrics is not None:
            self._found += self._metrics.finish()
        rest = self._lines.rest()
        return self._grouper.feed(rest, now) if rest is not None else []

    def _samples(self) -> list[Sample]:
        """The metrics read since the last reading, as samples (none without a format)."""
        if self._metrics is None:
            return []
        found, self._found = self._found, []
        return self._metrics.samples(found, {"path": str(self.path)})

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file, self._identity = None, None


def _start_of_last_line(handle: io.FileIO, size: int) -> int:
    """Where the last, possibly unfinished, line begins: a tail at the end starts there."""
    if size == 0:
        return 0
    back = min(size, _LAST_LINE_LOOKBACK)
    handle.seek(size - back)
    tail = handle.read(back)
    if tail.endswith(b"\n"):
        return size
    newline = tail.rfind(b"\n")
    return size - back + newline + 1 if newline >= 0 or back == size else size
