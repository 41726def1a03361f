"""The collector's live detection: the detector thread, its silences, where its alerts go, and
what a previous life of the collector left in the store."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from .._durable import DEFAULT_CHECKPOINT_INTERVAL_S, CheckpointWorker, restore_parts
from ..act import (
    ACTION_STATES,
    FINAL_STATES,
    Action,
    CommandBook,
    Playbooks,
    PolicyEngine,
    Remediation,
)
from ..detect import (
    AlertState,
    LiveAlert,
    LiveDetector,
    Recovery,
    RuleFiles,
    SilenceBook,
)
from ..model import Run, SampleBatch
from ..store import ActionQuery, AlertRow, Store, every
from ._alert_stream import AlertStreams
from ._event_log import EventLog
from ._writer import GroupWriter

__all__ = ["ACK_EVENT", "Detection", "live_alert", "open_alerts"]

#: The event kind of a person acknowledging an alert.
ACK_EVENT = "alert_ack"
#: Actions a restarted collector takes back: those not yet done.
UNFINISHED = frozenset(ACTION_STATES) - frozenset(FINAL_STATES)

log = logging.getLogger("stepwatch.server")


def live_alert(row: AlertRow) -> LiveAlert | None:
    """The alert of a row of the store's alert table; None for a record too malformed to read."""
    try:
        return LiveAlert.from_event(row.event())
    except (KeyError, TypeError, ValueError):
        return None


def open_alerts(store: Store, run: str | None = None) -> list[LiveAlert]:
    """The open alerts the store holds (of one run), oldest first."""
    found = (live_alert(row) for row in store.current.open_alerts(run))
    return [a for a in found if a is not None]


def unfinished_actions(store: Store) -> list[Action]:
    """The actions a previous life left waiting, queued or running."""
    query = ActionQuery(states=UNFINISHED)
    out = []
    for data in every(lambda cursor: store.current.actions(query, cursor, 10_000)):
        try:
            out.append(Action.from_json(data))
        except ValueError:
            continue  # a record in a shape this version does not read
    return out


class Detection:
    """Wires a ``LiveDetector`` to the store: records through ``EventLog``, silences, commands
    and unfinished actions restored from the store's tables, state checkpointed and restored
    (``restore``, before ``start``), SSE streams fed.

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
        self.silences.restore(store.current.silences(clock()))
        self.live = LiveDetector(
            rules, self.log.record, silences=self.silences, lateness_s=lateness_s
        )
        self.streams = AlertStreams()
        self.live.subscribe(self.streams.publish, muted=True)
        self.remediation = Remediation(
            playbooks or Playbooks(),
            self.log.write,
            clock=clock,
            restored=unfinished_actions(store),
        )
        self.live.subscribe(self.remediation.on_alert)  # a muted alert triggers nothing
        self.commands = CommandBook(clock)
        self.commands.restore(store.current.commands(live=True))
        self.policy = PolicyEngine(
            lambda: self.live.rules.policies,
            self.commands,
            self.log.record,
            clock=clock,
            history=self.log.audits_since,
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
        firing = [a for a in open_alerts(self.store) if a.state == AlertState.FIRING]
        self.live.recover(Recovery(replay, end, self._stored_alert, firing))

    def _stored_alert(self, alert_id: str) -> LiveAlert | None:
        """The latest transition of an alert the store holds (its alert table's row)."""
        row = self.store.current.alert(alert_id)
        return None if row is None else live_alert(row)

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
            a.closed(end, "run finished")
            for a in open_alerts(self.store, run.id)
            if a.state == AlertState.FIRING and a.id not in closed
        ]
        self.log.write([a.to_event() for a in left])  # after the detector's, in order
        for alert in left:  # pages hold alerts by their transitions: these are some too
            self.streams.publish(alert)

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
