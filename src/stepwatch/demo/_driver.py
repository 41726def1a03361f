"""The real-time side of the demo: one thread that plays the simulation on the wall clock.

Steps complete when their simulated duration has passed, hardware is read at
a fixed rate, and a progress line is printed every few seconds; everything
goes through the SDK, the spool and HTTP into the collector started here.
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from ..model import RunStatus
from ..server import CollectorOptions, ServerThread
from ._config import DemoConfig, DemoSummary
from ._fault_plan import FaultPlan
from ._fleet import Fleet, Sink
from ._hardware import HardwareSample, HardwareSim
from ._report import Reporter, step_events
from ._training import StepMetrics, TrainingSim

Out = Callable[[str], object]
#: When the loop falls this far behind the wall clock it skips ahead instead of catching up.
MAX_LAG_S = 2.0


class Player:
    """Plays steps and hardware readings at their times on a clock, with the planned faults.

    The clock is the wall clock live, or simulated time when a scenario is recorded.
    """

    def __init__(
        self,
        config: DemoConfig,
        fleet: Sink,
        report: Reporter,
        now: float,
        faults: FaultPlan | None = None,
    ) -> None:
        self.shape = config.shape()
        self.config, self.fleet, self.report = config, fleet, report
        self.faults = FaultPlan(self.shape) if faults is None else faults
        self.training, self.hardware = TrainingSim(self.shape), HardwareSim(self.shape)
        self.start = now
        self.faults_until = -math.inf
        self.last: StepMetrics | None = None
        self._begin(self.training.step(0), now)
        self.hw_index, self.hw_due = 0, now
        self.last_hw: tuple[float, HardwareSample] | None = None
        self.report_due = now + config.report_every_s
        self.samples = self.events = self.steps_done = 0

    def _begin(self, step: StepMetrics, now: float) -> None:
        self.current, self.step_start = self.faults.step(step, now - self.start), now
        self.pause_noticed = step.duration_s <= step.train_s  # nothing to announce

    def next_due(self) -> float:
        """The earliest moment something has to happen."""
        step_due = self.step_start + self.current.duration_s
        if not self.pause_noticed:
            step_due = self.step_start + self.current.train_s
        return min(step_due, self.hw_due, self.report_due)

    def advance(self, now: float) -> bool:
        """Do everything due by ``now``; False once the planned steps are all done."""
        self._inject(now)
        if now >= self.step_start + self.current.train_s:
            self._notice_pause()
        while now >= self.step_start + self.current.duration_s:
            self._complete(now)
            if self.steps_done >= self.shape.planned_total_steps:
                return False
        if now >= self.hw_due:
            self._read_hardware(now)
        if now >= self.report_due:
            phase = self.current.phase_at(now - self.step_start)
            self.report.progress(self.last, phase, self.samples)
            self.report_due = _next_tick(self.report_due, self.config.report_every_s, now)
        return True

    def _inject(self, now: float) -> None:
        """Act on the faults that begin by ``now``: a node falls silent, log lines appear."""
        t = now - self.start
        for fault in self.faults.starting(self.faults_until, t):
            self.report.fault(fault.text())
            if fault.kind == "node_down":
                self.fleet.drop_node(fault.node)
        for rank, line in self.faults.lines(self.faults_until, t, self.current.step):
            self.fleet.log_line(rank, line)
        self.faults_until = t

    def _notice_pause(self) -> None:
        if not self.pause_noticed:
            self.pause_noticed = True
            self.report.pause_started(self.current)

    def _complete(self, now: float) -> None:
        self._notice_pause()
        step = self.last = self.current
        self.samples += self.fleet.log_step(step)
        self.steps_done = step.step + 1
        for event in step_events(step, self.shape):
            self.fleet.event(event.kind, event.text, **event.data)
            self.report.event(event)
            self.events += 1
        end = self.step_start + step.duration_s
        self._begin(self.training.step(step.step + 1), end if now - end < MAX_LAG_S else now)

    def _read_hardware(self, now: float) -> None:
        activity = self.current.activity_at(now - self.step_start)
        prev, dt = (None, 0.0) if self.last_hw is None else (self.last_hw[1], now - self.last_hw[0])
        sample = self.hardware.sample(self.hw_index, activity, prev, dt)
        shown = self.faults.hardware(sample, now - self.start, self.hw_index)
        self.samples += self.fleet.log_hardware(shown)
        self.last_hw = (now, sample)  # the healthy reading carries the thermal state on
        self.hw_index += 1
        self.hw_due = _next_tick(self.hw_due, self.config.hw_interval_s, now)


def _next_tick(due: float, every: float, now: float) -> float:
    """The next time on a fixed schedule; after a stall it skips ahead rather than bursting."""
    following = due + every
    return following if following > now else now + every


def run_demo(
    config: DemoConfig,
    out: Out = print,
    *,
    clock: Callable[[], float] = time.monotonic,
    stop: threading.Event | None = None,
) -> DemoSummary:
    """Run a collector and a simulated multi-node training into it until Ctrl-C or the duration.

    Args:
        config: the job's size and pace, the store and the collector's address.
        out: where the URL, progress lines and notices go.
        clock: monotonic seconds, for the schedule.
        stop: set it (from another thread) to end the demo as Ctrl-C would.
    """
    run_id = f"demo-{uuid.uuid4().hex[:8]}"
    report = Reporter(config, out)
    with ExitStack() as stack:
        options = CollectorOptions(
            host=config.host,
            port=config.port,
            rules=config.rules,
            notify=config.notify,
            key=config.encryption_key,
        )
        server = ServerThread(config.store_path, options).start_or_elsewhere(out)
        stack.callback(server.stop)
        spool = config.spool_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="stepwatch-demo-"))
        )
        report.banner(server.url, run_id)
        faults = FaultPlan(config.shape(), config.faults)
        report.faults(faults)
        fleet = Fleet(
            config.shape(),
            run_id,
            server.url,
            spool,
            config.flush_interval_s,
            mortal=faults.down_nodes(),
            key=config.encryption_key,
        )
        player = Player(config, fleet, report, clock(), faults)
        status = _play_then_finish(player, clock, stop or threading.Event(), out)
    elapsed = clock() - player.start
    summary = DemoSummary(
        run_id, server.url, status, player.steps_done, player.samples, player.events, elapsed
    )
    report.done(summary, config.store_path)
    return summary


def _play_then_finish(
    player: Player, clock: Callable[[], float], stop: threading.Event, out: Out
) -> str:
    """Play until the end, Ctrl-C or ``stop``; then finish every run with how it ended."""
    status = RunStatus.KILLED
    try:
        status = _play(player, clock, stop)
    except KeyboardInterrupt:
        out("")  # past the ^C the terminal echoed
    except BaseException:
        status = RunStatus.FAILED
        raise
    finally:
        player.report.stopping(status)
        player.fleet.finish(status)
    return status


def _play(player: Player, clock: Callable[[], float], stop: threading.Event) -> str:
    """The loop: sleep until the next thing is due, do it; the run's final status."""
    duration = player.config.duration_s
    deadline = math.inf if duration is None else player.start + duration
    while True:
        if stop.wait(max(0.0, min(player.next_due(), deadline) - clock())):
            return RunStatus.KILLED
        now = clock()
        if now >= deadline:
            return RunStatus.FINISHED
        if not player.advance(now):
            return RunStatus.FINISHED
