"""The notifier: alert transitions in from the detector thread (never blocking it), messages
out to receivers on threads of their own, every delivery written to the audit trail.

One thread decides (``Dispatch``), one thread per receiver delivers, so a receiver that is
down only delays its own messages, retried with backoff; in the end its failure is logged
and audited. Both queues are bounded: past ``MAX_TRANSITIONS`` waiting, a transition is
dropped and logged (the detector never waits); past ``MAX_OUTBOX`` messages waiting for one
receiver, a new one is dropped, logged and audited as failed.

Across restarts the notifier is a part of the collector's checkpoint (``snapshot``,
``restore``): a group already told is not told again, its repeat timer runs on in wall time,
and the deliveries audited after the checkpoint count as sent. A message cut short by a crash
while it was being sent goes out again (at least once, never lost).
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

from .._periodic import Periodic
from .._redact import redact_urls
from .._worker import QueueWorker
from ..detect import AlertState, LiveAlert
from ..model import Event
from ._audit import AuditRecord
from ._incident_playbook import PlaybooksOf, no_playbooks
from ._notify_dispatch import Dispatch
from ._notify_message import Notification
from ._notify_state import PART, Saved, catch_up
from ._receivers import DeliveryError, Receiver
from ._routing_config import NotifyConfig
from ._state import History, audits

__all__ = ["MAX_OUTBOX", "MAX_TRANSITIONS", "Notifier"]

log = logging.getLogger("stepwatch.notify")

Record = Callable[[Sequence[Event]], None]
_SCOPE_ONLY = ("kind", "severity", "rule")  # in every alert's match labels; not an entity
#: Alert transitions waiting for the deciding thread.
MAX_TRANSITIONS = 10_000
#: Messages waiting for one receiver (one that is down retries each with backoff).
MAX_OUTBOX = 1_000
_RESULTS = ("ok", "failed")


class _Outbox:
    """One receiver's queue and delivering thread: at a stop, what waits is sent, one try each."""

    def __init__(
        self, receiver: Receiver, deliver: Callable[[_Outbox, Any], None], size: int
    ) -> None:
        self.receiver = receiver
        self.worker: QueueWorker[Any] = QueueWorker(
            lambda item: deliver(self, item),
            name=f"stepwatch-notify-{receiver.name}",
            failed=f"delivering to {receiver.name} failed unexpectedly; carrying on",
            log=log,
            maxsize=size,
        )


class Notifier:
    """Sends notifications for the alert transitions it is given, as ``config`` routes them.

    Args:
        config: receivers and the route tree.
        record: where audit events go (the collector's event log).
        clock: wall time of the audit events.
        monotonic: the clock of group waits and intervals.
        max_transitions: alert transitions that may wait for the deciding thread.
        max_outbox: messages that may wait for one receiver.
        history: the collector's records since a wall time, read once by ``restore`` to
            count the deliveries audited after the checkpoint as sent.
        playbooks: the playbooks of an incident's root cause, told with the incident.
    """

    name = PART

    def __init__(
        self,
        config: NotifyConfig,
        record: Record,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        max_transitions: int = MAX_TRANSITIONS,
        max_outbox: int = MAX_OUTBOX,
        history: History | None = None,
        playbooks: PlaybooksOf = no_playbooks,
    ) -> None:
        self.config, self._record, self._history = config, record, history
        self._playbooks = playbooks
        self._clock, self._monotonic = clock, monotonic
        self._dispatch = Dispatch(config.route, config.external_url, playbooks)
        # One lock for what is decided: the transitions waiting, the groups, the messages
        # handed to receivers and not yet delivered; a snapshot sees them whole.
        self._lock = threading.Lock()
        self._inbox: deque[LiveAlert] = deque()
        self._max_transitions, self._dropped = max_transitions, 0
        self._unsent: dict[int, Notification] = {}
        self._tokens = itertools.count()
        self._outcomes: Counter[tuple[str, str]] = Counter()  # (receiver, ok|failed): messages
        self._outcomes_lock = threading.Lock()  # receivers' threads and the deciding one count
        self._outboxes = {
            name: _Outbox(r, self._deliver, max_outbox) for name, r in config.receivers.items()
        }
        self._deciding = Periodic(
            self._decide,
            math.inf,
            name="stepwatch-notify",
            failed="notification routing failed on a step; carrying on",
            log=log,
            at_start=True,  # what a restored checkpoint left waiting
            at_stop=True,  # what was submitted before the stop is still filed, and sent
            next_in=self._next_due_in,
        )

    def submit(self, alert: LiveAlert) -> None:
        """Take a transition (a ``LiveDetector`` subscriber: returns at once, even when full)."""
        with self._lock:
            if len(self._inbox) < self._max_transitions:
                self._inbox.append(alert)
                self._deciding.wake()
                return
            self._dropped += 1
            dropped = self._dropped
        if dropped % 1000 == 1:  # one line per thousand, not a flood of its own
            log.error("notifications are behind: %d alert transitions dropped so far", dropped)

    # ---- the checkpoint -----------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The groups, the transitions not yet filed, the messages not yet delivered."""
        with self._lock:
            wall, shift = self._clock(), self._clock() - self._monotonic()
            state = self._dispatch.state(lambda t: t + shift)
            saved = Saved(wall, state, list(self._inbox), list(self._unsent.values()))
        return saved.encode()  # its alerts and messages are frozen: no need to hold the lock

    def restore(self, state: bytes) -> None:
        """Take back a snapshot and count the deliveries audited since as sent (call before
        ``start``); ValueError, and nothing changed, for a snapshot it cannot read."""
        saved = Saved.decode(state)
        shift = self._clock() - self._monotonic()
        dispatch = Dispatch(self.config.route, self.config.external_url, self._playbooks)
        for key in dispatch.load(saved.dispatch, lambda t: t - shift):
            log.warning("notification group %s is no longer routed: forgotten", key)
        sent = audits(self._history, saved.taken, "notify")
        unsent = catch_up(dispatch, saved.unsent, sent, lambda t: t - shift)
        with self._lock:
            self._dispatch = dispatch
            self._inbox.extend(saved.inbox)
            for notification in unsent:
                self._hand_over(notification)
        log.info("notification state restored: %d messages to deliver again", len(unsent))

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
            outbox.worker.start()
        self._deciding.start()
        return self

    def stop(self) -> None:
        """Send what is waiting now (one try each, no more retries), then end the threads."""
        if not self._deciding.alive:
            return
        self._deciding.stop()
        for outbox in self._outboxes.values():
            outbox.worker.request_stop()  # all at once: no receiver waits for another's retries
        for outbox in self._outboxes.values():
            outbox.worker.join()

    # ---- the deciding thread ------------------------------------------------------------

    def _decide(self) -> None:
        """File the transitions waiting, then hand over what is due (everything, at a stop)."""
        everything = self._deciding.stopping  # read first: what came before the stop is filed
        while self._file_one():
            pass
        with self._lock:
            self._step(self._flush, everything)

    def _next_due_in(self) -> float:
        """Seconds until a group is due (``math.inf``: none; a new transition wakes)."""
        with self._lock:
            return self._dispatch.next_due() - self._monotonic()

    def _file_one(self) -> bool:
        """File the oldest waiting transition, if any: one at a time, so that the detector's
        ``submit`` never waits for a burst to be filed, and a snapshot sees each one either
        waiting or filed."""
        with self._lock:
            if not self._inbox:
                return False
            self._step(self._dispatch.add, self._inbox.popleft(), self._monotonic())
            return True

    def _flush(self, everything: bool) -> None:
        """Hand what is due (everything unsent, at a stop) to the receivers' threads."""
        for notification in self._dispatch.due(self._monotonic(), all_groups=everything):
            self._hand_over(notification)

    def _hand_over(self, notification: Notification) -> None:
        """Queue a message for its receiver; it counts as unsent until its delivery ends."""
        outbox = self._outboxes.get(notification.receiver)
        if outbox is None:  # a message of a checkpoint, to a receiver the config dropped
            log.warning(
                "receiver %s is gone: %s not sent", notification.receiver, notification.title
            )
            return
        token = next(self._tokens)
        self._unsent[token] = notification
        if not outbox.worker.put((token, notification)):
            del self._unsent[token]
            why = f"dropped: {outbox.worker.maxsize} messages already wait for this receiver"
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

    def _deliver(self, outbox: _Outbox, item: tuple[int, Notification]) -> None:
        """Send with retries; audit the outcome (and log a failure)."""
        receiver, (token, notification) = outbox.receiver, item
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
            if outbox.worker.pause(receiver.retry.delay(attempts)):
                break  # shutting down: no more waiting
        with self._lock:
            self._unsent.pop(token, None)  # before its record: a snapshot between the two
            # has it neither unsent nor recorded, and the record, newer, counts it as sent
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
                "resolved": [a.id for a in n.alerts if a.state != AlertState.FIRING],
                "group": n.key,
                "attempts": attempts,
                "errors": errors,
            },
        )
        try:
            self._record([record.to_event(self._clock())])
        except Exception:
            log.exception("could not audit a notification to %s", receiver.name)
