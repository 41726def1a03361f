"""stepwatch's background jobs come in two shapes, each on one daemon thread: a step run
every so often (``Periodic``), or items taken from a queue and handled in order
(``QueueWorker``; ``BatchWorker`` takes all that waits at once). ``Worker`` is what they
share: the named thread, a stop that wakes it, the join, and a failed step logged with its
traceback while the thread carries on."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, NotRequired, TypedDict, TypeVar, Unpack

__all__ = ["BatchWorker", "QueueWorker", "Worker"]

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


class _QueueOptions(TypedDict):
    """What a queue worker is told besides its handler (see ``QueueWorker``)."""

    name: str
    failed: str
    log: logging.Logger
    maxsize: NotRequired[int]
    drain: NotRequired[bool]
    idle_s: NotRequired[float | None]
    idle: NotRequired[Callable[[], object] | None]
    last: NotRequired[Callable[[], object] | None]


class _Queued(Worker, Generic[T]):
    """The queue, the stop mark behind what waits, and the wait with an ``idle`` call."""

    def __init__(
        self,
        *,
        name: str,
        failed: str,
        log: logging.Logger,
        maxsize: int = 0,
        drain: bool = True,
        idle_s: float | None = None,
        idle: Callable[[], object] | None = None,
        last: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(name=name, failed=failed, log=log)
        self._drain, self._last = drain, last
        self._idle = idle
        self._idle_s = idle_s if idle is not None else None  # without idle: wait for items
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
        # after what waits, so a draining stop handles it first; a full queue makes room as
        # the thread takes items (a step that waits should end early on ``stop_event``)
        self._queue.put(_STOP)

    def _wanted(self) -> bool:
        """Whether an item taken now is handled (not dropped at a stop)."""
        return self._drain or not self.stopping

    def _take(self) -> T:
        """The next item; ``_IDLE`` when ``idle`` ran instead."""
        try:
            return self._queue.get(timeout=self._idle_s)
        except queue.Empty:
            assert self._idle is not None  # only waits with a timeout when there is one
            self.attempt(self._idle)
            return _IDLE  # type: ignore[no-any-return]

    def _finish(self) -> None:
        if self._last is not None:
            self.attempt(self._last)


class QueueWorker(_Queued[T]):
    """Hands each item ``put`` to ``handle``, in order, on its own thread.

    Args:
        handle: what is done with one item; one that raises is logged and the next comes.
        maxsize: items that may wait (0: no bound); ``put`` says when one did not fit.
        drain: at a stop, handle what waits (True) or drop it (False).
        idle_s: with ``idle``, called when no item came for this long.
        last: called on the thread at a stop, after the queue.
    """

    def __init__(self, handle: Callable[[T], object], **options: Unpack[_QueueOptions]) -> None:
        super().__init__(**options)
        self._handle = handle

    def _run(self) -> None:
        while (item := self._take()) is not _STOP:
            if item is not _IDLE and self._wanted():
                self.attempt(self._handle, item)
        self._finish()


class BatchWorker(_Queued[T]):
    """Hands ``handle`` every item waiting at once, until they weigh ``max_weight`` by
    ``weigh`` (requests that share one commit); otherwise as ``QueueWorker``."""

    def __init__(
        self,
        handle: Callable[[list[T]], object],
        *,
        weigh: Callable[[T], int],
        max_weight: int,
        **options: Unpack[_QueueOptions],
    ) -> None:
        super().__init__(**options)
        self._handle, self._weigh, self._max_weight = handle, weigh, max_weight

    def _run(self) -> None:
        stopped = False
        while not stopped and (item := self._take()) is not _STOP:
            if item is _IDLE:
                continue
            batch, stopped = self._gather(item)
            if self._wanted():
                self.attempt(self._handle, batch)
        self._finish()

    def _gather(self, item: T) -> tuple[list[T], bool]:
        """``item`` and what waits behind it; True when the stop mark came among them."""
        batch, weight = [item], self._weigh(item)
        while weight < self._max_weight:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)
            weight += self._weigh(item)
        return batch, False
