"""Drain a child process's stdout or stderr: echo it to the terminal, turn it into log events.

The reading thread only reads, echoes and groups lines, so the child waits
no longer than it would on its own terminal. The ``on_event`` callback runs
on a second thread, which also emits a traceback that has gone quiet. If the
callback falls far behind, events beyond ``max_pending`` are dropped and
counted rather than ever blocking the pipe. With a ``MetricLines``, the training metrics the
output prints go to ``on_reading`` from the reading thread: handing them to an agent only
appends to its in-memory buffer.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO

from .._worker import QueueWorker
from ..model import Event
from ._lines import LineBuffer, LineGrouper
from ._log_metrics import MetricLines, StepMetrics
from ._source import Reading

__all__ = ["OutputPump"]

log = logging.getLogger("stepwatch.collect")

_CHUNK_BYTES = 65536


class OutputPump:
    """Reads ``pipe`` until it closes; every chunk goes to ``echo`` at once, lines to ``on_event``.

    Args:
        pipe: the child's stdout or stderr, opened in binary mode; the pump closes it at its end.
        stream: ``"stdout"`` or ``"stderr"``, the ``stream`` label of the events.
        on_event: called with each finished log event, on the pump's dispatch thread.
        echo: where the raw bytes are copied (e.g. ``sys.stdout.buffer``), or None.
        labels: labels every event carries, besides ``stream``.
        clock: wall-clock time that stamps lines as they arrive.
        quiet_s: seconds after which a traceback that stopped mid-way is emitted as it is.
        max_pending: events waiting for ``on_event`` beyond which new ones are dropped.
        metrics: reads training metrics from the output (its format's lines), or None.
        on_reading: called with the samples ``metrics`` found and the time they arrived.
    """

    def __init__(
        self,
        pipe: IO[bytes],
        *,
        stream: str,
        on_event: Callable[[Event], None],
        echo: IO[bytes] | None = None,
        labels: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        quiet_s: float = 2.0,
        max_pending: int = 10000,
        metrics: MetricLines | None = None,
        on_reading: Callable[[Reading, float], None] | None = None,
    ) -> None:
        if metrics is not None and on_reading is None:
            raise ValueError("metrics need on_reading to go to")
        self._pipe, self._echo, self._on_event, self._clock = pipe, echo, on_event, clock
        self._labels = {**(labels or {}), "stream": stream}
        self._grouper = LineGrouper(self._labels, quiet_s=quiet_s)
        self._metrics, self._on_reading = metrics, on_reading
        self._lock = threading.Lock()  # the grouper is fed by one thread, polled by the other
        self.dropped = 0
        # a blocking read of its own: the pipe, not a stop, says when it ends
        self._reader = threading.Thread(
            target=self._read_loop, name=f"stepwatch-pump-{stream}", daemon=True
        )
        self._events: QueueWorker[Event] = QueueWorker(
            on_event,
            name=f"stepwatch-pump-{stream}-events",
            failed="stepwatch: the log event callback failed; carrying on",
            log=log,
            maxsize=max_pending,
            idle_s=quiet_s / 2,
            idle=self._emit_quiet,
        )

    def start(self) -> OutputPump:
        """Start reading; returns self so that creation and start can be one expression."""
        self._events.start()  # first: the reader stops it, maybe at once
        self._reader.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the pipe to close and every event to be handed over; False on timeout.

        The pipe closes when the child and every process that inherited it exit.
        """
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        self._reader.join(left())
        return not self._reader.is_alive() and self._events.join(left())

    def _read_loop(self) -> None:
        lines = LineBuffer()
        fd = self._pipe.fileno()
        try:
            while chunk := os.read(fd, _CHUNK_BYTES):
                self._write_echo(chunk)
                now = self._clock()
                if self._metrics is not None:
                    self._hand_over_metrics(self._metrics.push(chunk), now)
                with self._lock:
                    events = [e for ln in lines.push(chunk) for e in self._grouper.feed(ln, now)]
                    events += self._grouper.poll(now)
                self._hand_over(events)
        except OSError as exc:
            log.warning("stepwatch: reading the child's output failed: %s", exc)
        finally:
            self._finish(lines)

    def _finish(self, lines: LineBuffer) -> None:
        """At the pipe's end: close it, emit the last line and held tracebacks, then an end mark."""
        self._pipe.close()
        if self._metrics is not None:
            self._hand_over_metrics(self._metrics.finish(), self._clock())
        with self._lock:
            rest = lines.rest()
            events = self._grouper.feed(rest, self._clock()) if rest is not None else []
            events += self._grouper.flush()
        for event in events:
            self._events.put(event, block=True)  # the child is done writing: this blocks nobody
        self._events.request_stop()  # after what waits: every event is handed over

    def _write_echo(self, chunk: bytes) -> None:
        if self._echo is None:
            return
        try:
            self._echo.write(chunk)
            self._echo.flush()
        except (OSError, ValueError) as exc:  # the terminal went away: keep draining the pipe
            log.warning("stepwatch: echo of the child's output stopped: %s", exc)
            self._echo = None

    def _hand_over(self, events: list[Event]) -> None:
        for event in events:
            if not self._events.put(event):
                self.dropped += 1

    def _hand_over_metrics(self, found: list[StepMetrics], now: float) -> None:
        """Metrics to ``on_reading``; its failure is logged, the pipe is drained on regardless."""
        assert self._metrics is not None and self._on_reading is not None
        samples = self._metrics.samples(found, self._labels)
        if not samples:
            return
        try:
            self._on_reading(Reading(samples=samples), now)
        except Exception:
            log.exception("stepwatch: handing over the metrics of the child's output failed")

    def _emit_quiet(self) -> None:
        """Tracebacks that went quiet, as they are (the events thread, when nothing came)."""
        with self._lock:
            quiet = self._grouper.poll(self._clock())
        for event in quiet:
            self._events.attempt(self._on_event, event)
