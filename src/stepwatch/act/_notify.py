"""The notifier: alert transitions in from the detector thread (never blocking it), messages
out to receivers on threads of their own, every delivery written to the audit trail.

One thread decides (``Dispatch``), one thread per receiver delivers, so a receiver that is
down only delays its own messages, retried with backoff; in the end its failure is logged
and audited. Both queues are bounded: past ``MAX_TRANSITIONS`` waiting, a transition is
dropped and logged (the detector never waits); past ``MAX_OUTBOX`` messages waiting for one
receiver, a new one is dropped, logged and audited as failed.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from .._redact import redact_urls
from ..detect import LiveAlert
from ..model import Event
from ._audit import AuditRecord
from ._notify_dispatch import Dispatch
from ._notify_message import Notification
from ._receivers import DeliveryError, Receiver
from ._routing_config import NotifyConfig

__all__ = ["MAX_OUTBOX", "MAX_TRANSITIONS", "Notifier"]

log = logging.getLogger("stepwatch.notify")

Record = Callable[[Sequence[Event]], None]
_STOP = object()
_SCOPE_ONLY = ("kind", "severity", "rule")  # in every alert's match labels; not an entity
#: Alert transitions waiting for the deciding thread.
MAX_TRANSITIONS = 10_000
#: Messages waiting for one receiver (one that is down retries each with backoff).
MAX_OUTBOX = 1_000
_RESULTS = ("ok", "failed")


class _Outbox:
    """One receiver's queue and delivering thread."""

    def __init__(
        self, receiver: Receiver, deliver: Callable[[Receiver, Any], None], size: int
    ) -> None:
        self.receiver, self._deliver = receiver, deliver
        self.queue: queue.Queue[Any] = queue.Queue(size)
        self.thread = threading.Thread(
            target=self._run, name=f"stepwatch-notify-{receiver.name}", daemon=True
        )

    def _run(self) -> None:
        while (item := self.queue.get()) is not _STOP:
            self._deliver(self.receiver, item)


class Notifier:
    """Sends notifications for the alert transitions it is given, as ``config`` routes them.

    Args:
        config: receivers and the route tree.
        record: where audit events go (the collector's event log).
        clock: wall time of the audit events.
        monotonic: the clock of group waits and intervals.
        max_transitions: alert transitions that may wait for the deciding thread.
        max_outbox: messages that may wait for one receiver.
    """

    def __init__(
        self,
        config: NotifyConfig,
        record: Record,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        max_transitions: int = MAX_TRANSITIONS,
        max_outbox: int = MAX_OUTBOX,
    ) -> None:
        self.config, self._record = config, record
        self._clock, self._monotonic = clock, monotonic
        self._dispatch = Dispatch(config.route, config.external_url)
        self._queue: queue.Queue[Any] = queue.Queue(max_transitions)
        self._dropped = 0
        self._outcomes: Counter[tuple[str, str]] = Counter()  # (receiver, ok|failed): messages
        self._outcomes_lock = threading.Lock()  # receivers' threads and the deciding one count
        self._outboxes = {
            name: _Outbox(r, self._deliver, max_outbox) for name, r in config.receivers.items()
        }
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def submit(self, alert: LiveAlert) -> None:
        """Take a transition (a ``LiveDetector`` subscriber: returns at once, even when full)."""
        try:
            self._queue.put_nowait(alert)
        except queue.Full:
            self._dropped += 1
            if self._dropped % 1000 == 1:  # one line per thousand, not a flood of its own
                log.error(
                    "notifications are behind: %d alert transitions dropped so far",
                    self._dropped,
                )

    @property
    def dropped(self) -> int:
        """Alert transitions dropped since the start: the deciding thread was too far behind."""
        return self._dropped

    def outcomes(self) -> dict[tuple[str, str], int]:
        """Messages since the start by receiver and result (``ok`` or ``failed``), every
        receiver and result present (0 when none): the collector's metrics read them."""
        with self._outcomes_lock:
            told = Counter(self._outcomes)
        return {(r, result): told[r, result] for r in self._outboxes for result in _RESULTS}

    def start(self) -> Notifier:
        for outbox in self._outboxes.values():
            outbox.thread.start()
        self._thread = threading.Thread(target=self._run, name="stepwatch-notify", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Send what is waiting now (one try each, no more retries), then end the threads."""
        if self._thread is None:
            return
        self._queue.put(_STOP)
        self._thread.join()
        self._thread = None
        self._stopping.set()
        for outbox in self._outboxes.values():
            outbox.queue.put(_STOP)
        for outbox in self._outboxes.values():
            outbox.thread.join()

    # ---- the deciding thread ------------------------------------------------------------

    def _run(self) -> None:
        while True:
            wait = self._dispatch.next_due() - self._monotonic()
            try:
                item = self._queue.get(timeout=None if math.isinf(wait) else max(wait, 0.0))
            except queue.Empty:
                item = None
            if item is _STOP:
                self._step(self._flush, True)
                return
            if item is not None:
                self._step(self._dispatch.add, item, self._monotonic())
            self._step(self._flush, False)

    def _flush(self, everything: bool) -> None:
        """Hand what is due (everything unsent, at a stop) to the receivers' threads."""
        for notification in self._dispatch.due(self._monotonic(), all_groups=everything):
            outbox = self._outboxes[notification.receiver]
            try:
                outbox.queue.put_nowait(notification)
            except queue.Full:
                why = f"dropped: {outbox.queue.maxsize} messages already wait for this receiver"
                log.error("notifying %s of %s %s", outbox.receiver.name, notification.title, why)
                self._audit(outbox.receiver, notification, False, 0, [why])

    @staticmethod
    def _step(step: Callable[..., None], *args: Any) -> None:
        """One step of the deciding thread; a failure is logged and the thread carries on."""
        try:
            step(*args)
        except Exception:
            log.exception("notification routing failed on a step; carrying on")

    # ---- the delivering threads ---------------------------------------------------------

    def _deliver(self, receiver: Receiver, notification: Notification) -> None:
        """Send with retries; audit the outcome (and log a failure)."""
        errors: list[str] = []
        attempts = 0
        while True:
            attempts += 1
            try:
                receiver.send(notification)
                break
            except DeliveryError as exc:
                errors.append(str(exc))
                retryable = exc.retryable
            except Exception as exc:  # a receiver's own bug: fail this one, keep the thread
                errors.append(redact_urls(repr(exc)))  # its text may quote the receiver's URL
                log.error("receiver %s failed unexpectedly: %s", receiver.name, errors[-1])
                retryable = False
            if not retryable or attempts > receiver.retry.retries:
                break
            if self._stopping.wait(receiver.retry.delay(attempts)):
                break  # shutting down: no more waiting
        ok = len(errors) < attempts
        if not ok:
            log.error(
                "notifying %s of %s failed after %d attempts: %s",
                receiver.name,
                notification.title,
                attempts,
                errors[-1],
            )
        self._audit(receiver, notification, ok, attempts, errors)

    def _audit(
        self, receiver: Receiver, n: Notification, ok: bool, attempts: int, errors: list[str]
    ) -> None:
        with self._outcomes_lock:
            self._outcomes[receiver.name, _RESULTS[not ok]] += 1
        kinds = {a.kind for a in n.alerts}
        record = AuditRecord(
            action="notify",
            actor=receiver.name,
            what=n.title,
            result="ok" if ok else "failed",
            labels={k: v for k, v in n.common_labels.items() if k not in _SCOPE_ONLY},
            alert_id=n.alerts[0].id,
            kind=kinds.pop() if len(kinds) == 1 else "",
            detail={
                "status": n.status,
                "alerts": [a.id for a in n.alerts],
                "group": n.key,
                "attempts": attempts,
                "errors": errors,
            },
        )
        try:
            self._record([record.to_event(self._clock())])
        except Exception:
            log.exception("could not audit a notification to %s", receiver.name)
