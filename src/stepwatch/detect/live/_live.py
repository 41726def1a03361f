"""Detection inside the collector: committed batches in, alert transitions out, on a thread of
its own so that ingest never waits on detection.

Rules that read one series at a time see each batch as soon as it is
committed (a series comes from one sender, in order). Rules that compare the
members of a run (peers, absence) read through a reorder buffer that holds a
few seconds of data time, so every member's samples reach them in one time
order (see ``_reorder``). Each transition is recorded as an event, checked
against silences and inhibitions, and handed to subscribers.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...config import RuleError
from ...model import Event, SampleBatch
from ...store import Position
from ..alerts import DEFAULT_INHIBITIONS, Inhibition, SilenceBook
from ..engine import Alert, AlertState, Engine
from ..rules import RuleFiles, RuleSet
from . import _live_state
from ._engines import Engines
from ._idle import IDLE_RUN_S, IdleRuns
from ._live_alert import LiveAlert
from ._open_alerts import OpenAlerts
from ._recovery import Recovery, recorded_before
from ._reorder import Reorder, SeriesOrder, merge
from ._subscribers import Subscriber, Subscribers

__all__ = ["LiveDetector", "LiveStats", "ReloadOutcome"]

log = logging.getLogger("stepwatch.detect")

RULES_ERROR_EVENT = "rules_error"
RULES_LOADED_EVENT = "rules_loaded"

Record = Callable[[Sequence[Event]], None]


@dataclass(frozen=True, slots=True)
class ReloadOutcome:
    """What a reload did: the rules now running and how many kept their state, or the error."""

    rules: int
    kept: int
    error: str | None = None


@dataclass(slots=True)
class LiveStats:
    """Counters for the collector's own health."""

    samples: int = 0
    dropped: int = 0  # samples never seen by detection: the queue was full
    late: int = 0  # samples whose time was raised to keep time order
    errors: int = 0  # batches an engine failed on (logged)
    transitions: int = 0
    runs: int = 0  # runs whose detection state is held: those sending now, not all ever seen


@dataclass(slots=True)
class _Command:
    """Work for the detector thread, and its outcome for the caller waiting on ``done``."""

    run: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: Exception | None = None

    def execute(self) -> None:
        try:
            self.result = self.run()
        except Exception as exc:
            self.error = exc
        finally:
            self.done.set()


_STOP = object()
#: Batches committed together, and the store position after their commit.
_Fed = tuple[list[SampleBatch], Position | None]
#: How long a checkpoint waits for the detector thread to take its snapshot.
SNAPSHOT_TIMEOUT_S = 600.0
#: The detector's state as checkpointed: name -> (attribute, type it must have).
_STATE: dict[str, tuple[str, type]] = {
    "engines": ("_engines", Engines),
    "order": ("_order", SeriesOrder),
    "reorder": ("_reorder", Reorder),
    "alerts": ("_alerts", OpenAlerts),
    "data_now": ("_data_now", float),
    "rules": ("rules", RuleSet),
}


class LiveDetector:
    """Runs the rules over every committed batch on its own thread.

    Args:
        rules: the rule files (and base set) to run and watch.
        record: stores events (alert transitions, rule errors); called on the detector thread.
        silences: the silences to consult; a fresh empty book by default.
        lateness_s: data time the member-comparing rules wait for late samples.
        inhibitions: which firing kinds mute which others.
        max_queued_samples: beyond this many samples waiting, new batches skip detection
            (counted in ``stats.dropped`` and logged) rather than making ingest wait.
        watch_interval_s: how often the rule files' stat is polled (wall seconds).
        idle_run_s: wall seconds without a sample after which a run that never finished
            loses its detection state; its alerts stay as the store holds them.

    Its state survives restarts (``snapshot``, ``restore``, then ``recover`` before ``start``).
    """

    #: The key of the detector's state in the store's checkpoint.
    name = "detection"

    def __init__(
        self,
        rules: RuleFiles,
        record: Record,
        *,
        silences: SilenceBook | None = None,
        lateness_s: float = 2.0,
        inhibitions: Sequence[Inhibition] = DEFAULT_INHIBITIONS,
        max_queued_samples: int = 2_000_000,
        watch_interval_s: float = 1.0,
        idle_run_s: float = IDLE_RUN_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._files, self._record = rules, record
        self._detectors = rules.detectors
        self.silences = silences or SilenceBook()
        self._max_queued = max_queued_samples
        self._watch_interval = watch_interval_s
        self._monotonic = monotonic
        self.rules = rules.load()
        self._engines = Engines(self.rules, self._detectors)
        self._order = SeriesOrder()
        self._reorder = Reorder(lateness_s, max(lateness_s, 0.5), monotonic)
        self._idle = IdleRuns(idle_run_s, monotonic)
        self._inhibitions = tuple(inhibitions)
        self._alerts = OpenAlerts(self._inhibitions)
        self._data_now = float("-inf")
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._queued = 0
        self._lock = threading.Lock()
        self._subscribers = Subscribers()
        self._thread: threading.Thread | None = None
        self.stats = LiveStats()
        self._restored = False
        self._recovery: Recovery | None = None
        self._replayed_to: Position | None = None
        self._recorded: Callable[[str], LiveAlert | None] | None = None  # while replaying
        self._position = Position()
        self._ready = threading.Event()
        #: The store position the last ``snapshot`` stands at: the last commit it had seen.
        self.snapshot_position = Position()

    # ---- the collector's side -----------------------------------------------------------

    def start(self) -> LiveDetector:
        """Start the thread; it first replays what ``recover`` named, then turns ``ready``."""
        self._thread = threading.Thread(target=self._run, name="stepwatch-detect", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Process what is queued, release every held sample, and end the thread."""
        if self._thread is None:
            return
        self._queue.put(_STOP)
        self._thread.join()
        self._thread = None

    @property
    def ready(self) -> bool:
        """Running, and caught up with what a previous life left to replay."""
        return self._ready.is_set()

    def feed(self, batches: Sequence[SampleBatch], position: Position | None = None) -> None:
        """Queue committed batches, and the store position after their commit; never blocks
        (over the limit they skip detection)."""
        size = sum(len(b) for b in batches)
        with self._lock:
            if self._queued + size > self._max_queued and self._queued:
                self.stats.dropped += size
                dropped = True
            else:
                self._queued += size
                dropped = False
        if dropped:
            log.warning("detection is behind: %d samples skipped detection", size)
            return
        self._queue.put((list(batches), position))

    @property
    def queued(self) -> int:
        """Samples committed but not yet seen by detection (its lag)."""
        with self._lock:
            return self._queued

    @property
    def data_now(self) -> float:
        """The newest data time detection has seen (-inf before any sample): its lag is the
        wall time minus this."""
        return self._data_now

    def firing(self) -> list[LiveAlert]:
        """The alerts firing now, read from any thread without waiting on the detector thread
        (a copy: ``dict.copy`` is one step under the GIL), for figures that must not block."""
        return list(self._alerts.open.copy().values())

    def subscribe(self, callback: Subscriber, *, muted: bool = False) -> Callable[[], None]:
        """Call ``callback`` (on the detector thread) with each transition that is not
        silenced or inhibited, or with every one when ``muted``; returns the unsubscribe."""
        return self._subscribers.add(callback, muted=muted)

    def reload(self, timeout: float | None = 30.0) -> ReloadOutcome:
        """Re-read the rule files now (they are also watched); the old rules stay on error."""
        outcome = self._call(self._reload, timeout)
        assert isinstance(outcome, ReloadOutcome)
        return outcome

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until everything fed so far is processed, held samples included."""
        self._call(lambda: self._release(force=True), timeout)

    def finish_run(self, run: str, ts: float, timeout: float | None = 30.0) -> list[LiveAlert]:
        """Resolve the alerts of a run that ended at ``ts`` (no data will resolve them now),
        after everything fed before; its detector state is dropped. Returns them resolved."""
        return list(self._call(lambda: self._finish_run(run, ts), timeout))

    def _finish_run(self, run: str, ts: float) -> list[LiveAlert]:
        self._release(force=True)  # the run's last samples may still change its alerts
        self._forget(run)
        ended = [a.closed(ts, "run finished") for a in self._alerts.of_run(run)]
        self._publish(ended)
        return ended

    def _forget(self, run: str) -> None:
        """Drop all detection state of a run, after judging the samples it still held."""
        held = self._reorder.forget(run)
        if held is not None:
            self._emit(self._process(self._engines.ordered, held))
        self._engines.forget_run(run)
        self._order.forget_run(run)
        self._idle.forget(run)
        self.stats.runs = len(self._idle)

    def _forget_idle(self) -> None:
        """Runs quiet for ``idle_run_s`` that never finished: their state goes, their alerts
        stay open in the store (a finish that comes later still resolves them)."""
        for run in self._idle.idle():
            self._forget(run)
            self._alerts.drop_run(run)
            log.info(
                "run %s sent nothing for %.0f s: its detection state is dropped",
                run,
                self._idle.idle_s,
            )

    def warming_up(self, timeout: float | None = 30.0) -> list[dict[str, Any]]:
        """The rules that cannot judge an entity yet, and how far their baseline is: an alert
        that cannot fire yet should not pass for a run with nothing wrong."""
        return list(self._call(self._engines.warming_up, timeout))

    def snapshot(self) -> bytes:
        """The detector's state, taken between batches; ``snapshot_position`` says where."""
        if self._thread is None:
            return self._snapshot()
        return bytes(self._call(self._snapshot, SNAPSHOT_TIMEOUT_S))

    def _snapshot(self) -> bytes:
        state = {name: getattr(self, attr) for name, (attr, _) in _STATE.items()}
        blob = _live_state.dumps(state, self._env())
        self.snapshot_position = self._position
        return blob

    def restore(self, state: bytes) -> None:
        """Take back a snapshot before ``start``; ValueError, and nothing changed, for one it
        cannot read. The rule files as they are then apply once the thread starts."""
        if self._thread is not None:
            raise RuntimeError("the live detector restores its state before it starts")
        got = _live_state.loads(state, self._env())
        if not all(isinstance(got.get(name), kind) for name, (_, kind) in _STATE.items()):
            raise ValueError("the checkpoint of the live detector lacks part of its state")
        for name, (attr, _) in _STATE.items():
            setattr(self, attr, got[name])
        self._alerts.rebind(self._inhibitions)
        self._reorder.rebase()
        self._restored = True

    def recover(self, recovery: Recovery) -> None:
        """Before ``start``: what to replay first, and the alerts the store holds."""
        self._recovery = recovery

    def _env(self) -> dict[str, object]:
        """What the state refers to that belongs to this life, not to the state."""
        return {"detectors": self._detectors, "monotonic": self._monotonic}

    def open_alerts(self) -> list[LiveAlert]:
        """The alerts firing now, as this detector knows them."""
        return list(self._call(lambda: list(self._alerts.open.values()), 30.0))

    def _call(self, fn: Callable[[], Any], timeout: float | None) -> Any:
        if self._thread is None:
            raise RuntimeError("the live detector is not running")
        command = _Command(fn)
        self._queue.put(command)
        if not command.done.wait(timeout):
            raise TimeoutError("the live detector did not answer in time")
        if command.error is not None:
            raise command.error
        return command.result

    # ---- the detector thread ------------------------------------------------------------

    def _run(self) -> None:
        self._guarded(self._recover)
        self._ready.set()
        next_watch = self._monotonic() + self._watch_interval
        pending: Any = None
        while True:
            item, pending = pending, None
            if item is None:
                try:
                    item = self._queue.get(timeout=min(self._watch_interval, 0.25))
                except queue.Empty:
                    pass
            if item is _STOP:
                self._guarded(self._release, True)
                return
            if isinstance(item, _Command):
                item.execute()
            elif item is not None:
                batches, position, pending = self._drain(item)
                self._guarded(self._ingest, batches, position)
            self._guarded(self._release)
            if self._monotonic() >= next_watch:
                next_watch = self._monotonic() + self._watch_interval
                if self._files.changed():
                    self._guarded(self._reload)
                self._guarded(self._forget_idle)

    def _guarded(self, step: Callable[..., object], *args: Any) -> None:
        """One step of the thread; a failure is logged and counted, and detection carries on."""
        try:
            step(*args)
        except Exception:
            self.stats.errors += 1
            log.exception("live detection failed on a step; carrying on")

    def _drain(self, item: _Fed) -> tuple[list[SampleBatch], Position | None, Any]:
        """These batches and every other one already waiting, up to the first command (which
        is returned, to run next), and the position after the last: the engine's cost is
        mostly per series, so a backlog is caught up in one call."""
        batches, position = item
        while True:
            try:
                following = self._queue.get_nowait()
            except queue.Empty:
                return batches, position, None
            if not isinstance(following, tuple):
                return batches, position, following
            batches += following[0]
            position = following[1] or position

    def _ingest(self, batches: list[SampleBatch], position: Position | None) -> None:
        batch = merge(batches)
        with self._lock:
            self._queued -= len(batch)
        if position is not None:
            if self._replayed_to is not None and position.within(self._replayed_to):
                return  # the replay at start has seen these already
            self._position = position
        self._detect(batch)

    def _recover(self) -> None:
        """Replay what the store took since the checkpoint, telling only what is new."""
        recovery, self._recovery = self._recovery, None
        if recovery is None:
            return
        self._alerts.adopt(recovery)
        if self._restored and self._rules_changed():
            self._reload()  # the rule files as they are now, over the state they left
        self._recorded = recovery.recorded
        began, samples = self._monotonic(), self.stats.samples
        try:
            for batch in recovery.batches:
                self._detect(batch)
                self._release()
        finally:
            self._recorded = None
            self._position = self._replayed_to = recovery.end
        took = self._monotonic() - began
        replayed = self.stats.samples - samples
        log.info("detection caught up: %d samples replayed in %.2f s", replayed, took)

    def _rules_changed(self) -> bool:
        """The rule files say otherwise than the rules the state was taken under."""
        try:
            return self._files.load() != self.rules
        except RuleError:
            return True  # the reload says what is wrong, and keeps the rules running

    def _detect(self, batch: SampleBatch) -> None:
        size = len(batch)
        self.stats.samples += size
        self._idle.heard(batch)
        self.stats.runs = len(self._idle)
        if size:
            self._data_now = max(self._data_now, float(batch.ts.max()))
        alerts = self._process(self._engines.now, self._order(batch))
        self._reorder.add(batch, self._engines.wanted)
        self.stats.late = self._order.late + self._reorder.late
        self._emit(alerts)

    def _release(self, force: bool = False) -> None:
        alerts: list[Alert] = []
        for batch in self._reorder.release(force):
            alerts += self._process(self._engines.ordered, batch)
        self._emit(alerts)

    def _process(self, engine: Engine, batch: SampleBatch) -> list[Alert]:
        try:
            return engine.process(batch)
        except Exception:
            self.stats.errors += 1
            log.exception("detection failed on a batch of %d samples; skipped", len(batch))
            return []

    # ---- rules --------------------------------------------------------------------------

    def _reload(self) -> ReloadOutcome:
        try:
            rules = self._files.load()
        except RuleError as exc:
            log.error("rule files not reloaded, the previous rules keep running: %s", exc)
            self._record([Event(self.silences.clock(), RULES_ERROR_EVENT, str(exc), {}, {})])
            return ReloadOutcome(len(self.rules), len(self.rules), str(exc))
        dropped = self._engines.reload(rules)
        ended = [  # an alert another rule still holds firing stays open, in its name
            a
            for a in self._alerts.open.values()
            if a.rule_key in dropped and not self._engines.firing(a.kind, a.labels)
        ]
        self._publish([a.closed(self._data_now, "rule changed") for a in ended])
        before = {r.key for r in self.rules.rules}
        kept = sum(1 for r in rules.rules if r.key in before and r.key not in dropped)
        data = {"rules": len(rules), "kept": kept}
        self.rules = rules
        text = f"{len(rules)} rules loaded, {kept} kept their state"
        self._record([Event(self.silences.clock(), RULES_LOADED_EVENT, text, {}, data)])
        log.info(text)
        return ReloadOutcome(len(rules), kept)

    # ---- alerts -------------------------------------------------------------------------

    def _emit(self, alerts: list[Alert]) -> None:
        out = []
        for alert in sorted(alerts, key=lambda a: a.ts):
            if alert.state == AlertState.PENDING:
                continue  # a condition that lapses before ``for`` leaves no transition to close it
            judged = self._alerts.judged(LiveAlert.of(alert), self.silences.mutes)
            if self._alerts.continues(judged):
                continue  # the alert a previous life recorded goes on, under its own id
            self._alerts.track(judged)  # the next alert's inhibition sees this one
            out.append(judged)
        self._publish(out)

    def _publish(self, alerts: list[LiveAlert]) -> None:
        """Record the transitions, keep the firing ones, tell the subscribers (while replaying,
        only of what the store does not hold yet)."""
        for alert in alerts:
            self._alerts.track(alert)
        if (recorded := self._recorded) is not None:
            alerts = [a for a in alerts if not recorded_before(a, recorded)]
        if not alerts:
            return
        self.stats.transitions += len(alerts)
        try:
            self._record([a.to_event() for a in alerts])
        except Exception:
            log.exception("could not record %d alert transitions", len(alerts))
        self._subscribers.tell(alerts)
