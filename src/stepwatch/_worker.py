"""Every background job of stepwatch is one of two shapes on one daemon thread: a step run
every so often (``Periodic``), or items taken from a queue and handled in order
(``QueueWorker``). ``Worker`` is what they share: the named thread, a stop that wakes it, the
join, and a failed step logged once with its traceback while the thread carries on."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["QueueWorker", "Worker"]

T = TypeVar("T")
_STOP: Any = object()
_IDLE: Any = object()


class Worker:
    """A daemon thread named ``name`` running ``_run`` until asked to stop; may start again
    after ``stop`` (one app, many lifespans). ``failed`` is logged, with the traceback, when
    a step run through ``attempt`` raises."""

    def __init__(self, *, name: str, failed: str, log: logging.Logger) -> None:
        self.name, self._failed, self._log = name, failed, log
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        """Asked to stop: a long step ends early when it checks this between its parts."""
        return self._stop_event.is_set()

    @property
    def stop_event(self) -> threading.Event:
        """Set once a stop is asked, for a step that waits on something else (a process)."""
        return self._stop_event

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._stop_event.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def pause(self, seconds: float) -> bool:
        """Sleep that a stop cuts short (a retry's delay); True when stopping."""
        return self._stop_event.wait(seconds)

    def request_stop(self) -> None:
        """Ask the thread to end without waiting for it (``join`` waits)."""
        if self._thread is None:
            return
        self._stop_event.set()
        self._woken()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the thread to end; False when it still runs after ``timeout_s``."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        if thread.is_alive():
            return False
        self._thread = None
        return True

    def stop(self) -> None:
        """End the thread once the step under way, if any, is over."""
        self.request_stop()
        self.join()

    def attempt(self, step: Callable[..., object], *args: Any) -> None:
        """One step, a failure logged."""
        try:
            step(*args)
        except Exception:
            self._log.exception(self._failed)

    def _woken(self) -> None:
        """Make the thread see the stop now (it may be waiting)."""

    def _run(self) -> None:
        raise NotImplementedError


class QueueWorker(Worker, Generic[T]):
    """Hands each item ``put`` to ``handle``, in order, on its own thread.

    Args:
        handle: what is done with one item; one that raises is logged and the next comes.
        maxsize: items that may wait (0: no bound); ``put`` says when one did not fit.
        drain: at a stop, handle what waits (True) or drop it (False).
        idle_s: with ``idle``, called when no item came for this long.
    """

    def __init__(
        self,
        handle: Callable[[T], object],
        *,
        name: str,
        failed: str,
        log: logging.Logger,
        maxsize: int = 0,
        drain: bool = True,
        idle_s: float | None = None,
        idle: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(name=name, failed=failed, log=log)
        self._handle, self._drain = handle, drain
        self._idle_s, self._idle = (idle_s, idle) if idle is not None else (None, None)
        self.maxsize = maxsize
        self._queue: queue.Queue[T] | queue.SimpleQueue[T]
        self._queue = queue.Queue(maxsize) if maxsize else queue.SimpleQueue()

    def put(self, item: T, *, block: bool = False) -> bool:
        """Queue ``item``; False, and nothing queued, when the queue is full (unless
        ``block``: then wait for room)."""
        try:
            self._queue.put(item, block=block)
        except queue.Full:
            return False
        return True

    def _woken(self) -> None:
        self._queue.put(_STOP)  # after what waits: a draining stop handles it first

    def _run(self) -> None:
        while (item := self._take()) is not _STOP:
            if item is not _IDLE and (self._drain or not self.stopping):
                self.attempt(self._handle, item)

    def _take(self) -> T:
        """The next item; ``_IDLE`` when ``idle`` ran instead."""
        try:
            return self._queue.get(timeout=self._idle_s)
        except queue.Empty:
            assert self._idle is not None  # only waits with a timeout when there is one
            self.attempt(self._idle)
            return _IDLE  # type: ignore[no-any-return]
