"""The collector's live detection: the detector thread, its silences, where its alerts go, and
what a previous life of the collector left in the store."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from .._durable import DEFAULT_CHECKPOINT_INTERVAL_S, CheckpointWorker, restore_parts
from ..act import (
    ACTION_EVENT,
    AUDIT_EVENT,
    COMMAND_ACK_EVENT,
    COMMAND_EVENT,
    CommandBook,
    Playbooks,
    PolicyEngine,
    Remediation,
)
from ..detect import (
    ALERT_EVENT,
    SILENCE_EVENT,
    SILENCE_EXPIRED_EVENT,
    AlertState,
    LiveAlert,
    LiveDetector,
    Recovery,
    RuleFiles,
    SilenceBook,
)
from ..model import Run, SampleBatch
from ..store import Store
from ._alert_stream import AlertStreams
from ._event_log import EventLog
from ._writer import GroupWriter

__all__ = ["ACK_EVENT", "Detection", "latest_alerts"]

#: The event kind of a person acknowledging an alert.
ACK_EVENT = "alert_ack"
#: How many of the newest events of one kind the collector reads back (alerts, silences).
HISTORY = 100_000

log = logging.getLogger("stepwatch.server")


def latest_alerts(store: Store, run: str | None = None) -> dict[str, LiveAlert]:
    """The latest transition of each alert the store holds, by id, oldest first; a record too
    malformed to read is left out."""
    latest: dict[str, LiveAlert] = {}
    for event in store.records(run=run, kind=ALERT_EVENT, limit=HISTORY):
        try:
            alert = LiveAlert.from_event(event)
        except (KeyError, TypeError, ValueError):
            continue
        latest.pop(alert.id, None)
        latest[alert.id] = alert
    return latest


def acked_ids(store: Store, run: str | None = None) -> set[str]:
    """Alerts someone acknowledged."""
    acks = store.records(run=run, kind=ACK_EVENT, limit=HISTORY)
    return {str(e.data.get("id")) for e in acks}


class Detection:
    """Wires a ``LiveDetector`` to the store: records through ``EventLog``, silences restored
    from their events, state checkpointed and restored (``restore``, before ``start``), SSE
    streams fed.

    Args:
        store: the collector's store.
        writer: its group writer (events take the same path as batches).
        rules: the rules to run and watch.
        lateness_s: data time the member-comparing rules wait for late samples.
        clock: wall time for silences and acks.
        playbooks: the remediations alerts and people may run (none by default).
        project_of: the project of a run (silences match an alert's ``project``).
        checkpoint_interval_s: seconds between checkpoints of the detection state.
    """

    def __init__(
        self,
        store: Store,
        writer: GroupWriter,
        rules: RuleFiles,
        *,
        lateness_s: float = 2.0,
        clock: Callable[[], float],
        playbooks: Playbooks | None = None,
        project_of: Callable[[str | None], str | None] = lambda run: None,
        checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S,
    ) -> None:
        self.store, self.clock = store, clock
        self.log = EventLog(store, writer)
        self.silences = SilenceBook(self.log.write, clock, project_of)
        self.silences.restore(
            store.records(kind=SILENCE_EVENT, limit=HISTORY)
            + store.records(kind=SILENCE_EXPIRED_EVENT, limit=HISTORY)
        )
        self.live = LiveDetector(
            rules, self.log.record, silences=self.silences, lateness_s=lateness_s
        )
        self.streams = AlertStreams()
        self.live.subscribe(self.streams.publish, muted=True)
        self.remediation = Remediation(
            playbooks or Playbooks(),
            self.log.write,
            clock=clock,
            restored=store.records(kind=ACTION_EVENT, limit=HISTORY),
        )
        self.live.subscribe(self.remediation.on_alert)  # a muted alert triggers nothing
        self.commands = CommandBook(clock)
        self.commands.restore(
            store.records(kind=COMMAND_EVENT, limit=HISTORY)
            + store.records(kind=COMMAND_ACK_EVENT, limit=HISTORY)
        )
        self.policy = PolicyEngine(
            lambda: self.live.rules.policies,
            self.commands,
            self.log.record,
            clock=clock,
            history=lambda since: store.records(kind=AUDIT_EVENT, start=since, limit=HISTORY),
        )
        self.live.subscribe(self.policy.on_alert, muted=True)  # muted ones end escalations
        #: Checkpoints the detector (and whatever other parts are added before ``restore``).
        self.checkpoints = CheckpointWorker(
            store,
            [self.live, self.policy],
            position=lambda: self.live.snapshot_position,
            barrier=lambda: self.log.write([]),  # the records the parts wrote are stored first
            interval_s=checkpoint_interval_s,
        )

    def feed(self, batches: Sequence[SampleBatch]) -> None:
        """The writer's commit hook: batches just committed, with the store's position."""
        self.live.feed(batches, self.store.position())

    def restore(self) -> None:
        """Restore every part from the store's checkpoint and have the detector replay what
        came since, before the writer takes new batches (nothing committed then is replayed)."""
        checkpoint = self.store.load_checkpoint()
        restored = restore_parts(self.checkpoints.parts, checkpoint)
        end = self.store.position()
        start = checkpoint.position if checkpoint and self.live.name in restored else end
        if not start.within(end):
            log.warning("the checkpoint is ahead of the store; detection starts from now")
            start = end
        replay = self.store.batches_since(start, end)
        self.live.recover(Recovery.of(replay, end, latest_alerts(self.store)))

    def finish_run(self, run: Run) -> None:
        """Resolve a finished run's alerts: those of its detectors (notified like any other
        resolution) and any other left firing; answers once they are stored."""
        end = self.clock() if run.end is None else run.end
        try:
            closed = {a.id for a in self.live.finish_run(run.id, end)}
        except TimeoutError:
            log.warning("detection is behind: run %s's alerts resolve once it catches up", run.id)
            return
        left = [
            a.but(state=AlertState.RESOLVED, ts=max(a.ts, end), reason="run finished")
            for a in latest_alerts(self.store, run.id).values()
            if a.state == AlertState.FIRING and a.id not in closed
        ]
        self.log.write([a.to_event() for a in left])  # after the detector's, in order

    def start(self) -> None:
        self.streams.open()
        self.remediation.start()
        self.policy.start()
        self.live.start()  # what it replays first reaches subscribers that run
        self.checkpoints.start()

    def stop(self) -> None:
        """End the streams, then let the detector finish what the writer handed it (the
        last checkpoint is taken after this, by ``checkpoints.stop``)."""
        self.checkpoints.halt()
        self.remediation.stop()  # a playbook still running is cut short
        self.streams.close()
        self.live.stop()
        self.policy.stop()
