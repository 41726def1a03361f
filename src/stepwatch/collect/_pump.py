"""Drain a child process's stdout or stderr: echo it to the terminal, turn it into log events.

The reading thread only reads, echoes and groups lines, so the child waits
no longer than it would on its own terminal. The ``on_event`` callback runs
on a second thread, which also emits a traceback that has gone quiet. If the
callback falls far behind, events beyond ``max_pending`` are dropped and
counted rather than ever blocking the pipe.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO

from ..model import Event
from ._lines import LineBuffer, LineGrouper

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
    ) -> None:
        self._pipe, self._echo, self._on_event, self._clock = pipe, echo, on_event, clock
        self._quiet_s = quiet_s
        self._grouper = LineGrouper({**(labels or {}), "stream": stream}, quiet_s=quiet_s)
        self._lock = threading.Lock()  # the grouper is fed by one thread, polled by the other
        self._queue: queue.Queue[Event | None] = queue.Queue(maxsize=max_pending)
        self.dropped = 0
        self._reader = threading.Thread(
            target=self._read_loop, name=f"stepwatch-pump-{stream}", daemon=True
        )
        self._dispatcher = threading.Thread(
            target=self._dispatch_loop, name=f"stepwatch-pump-{stream}-events", daemon=True
        )

    def start(self) -> OutputPump:
        """Start reading; returns self so that creation and start can be one expression."""
        self._reader.start()
        self._dispatcher.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the pipe to close and every event to be handed over; False on timeout.

        The pipe closes when the child and every process that inherited it exit.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in (self._reader, self._dispatcher):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)
            if thread.is_alive():
                return False
        return True

    def _read_loop(self) -> None:
        lines = LineBuffer()
        fd = self._pipe.fileno()
        try:
            while chunk := os.read(fd, _CHUNK_BYTES):
                self._write_echo(chunk)
                now = self._clock()
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
        with self._lock:
            rest = lines.rest()
            events = self._grouper.feed(rest, self._clock()) if rest is not None else []
            events += self._grouper.flush()
        for event in events:
            self._queue.put(event)  # the child is done writing: waiting here blocks nobody
        self._queue.put(None)  # the end mark

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
            try:
                self._queue.put_nowait(event)
            except queue.Full:
                self.dropped += 1

    def _dispatch_loop(self) -> None:
        while True:
            try:
                event = self._queue.get(timeout=self._quiet_s / 2)
            except queue.Empty:
                with self._lock:
                    quiet = self._grouper.poll(self._clock())
                for e in quiet:
                    self._deliver(e)
                continue
            if event is None:
                return
            self._deliver(event)

    def _deliver(self, event: Event) -> None:
        try:
            self._on_event(event)
        except Exception:
            log.exception("stepwatch: the log event callback failed; carrying on")
