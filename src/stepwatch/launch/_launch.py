"""``stepwatch run -- CMD``: one command's whole life recorded as a run.

Starts a collector when none is given, an agent beside the command, runs the
command with the SDK's environment set (so every rank joins the same run),
echoes and records its output (and, with a format to parse, the training metrics it prints),
and ends the run as the command ended.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from .._encryption import ENV_KEY, ENV_KEY_FILE
from .._links import DEFAULT_PORT, look_again, run_link
from ..collect import Agent, AgentOptions, HostSource, MetricLines, OutputPump, open_agent
from ..model import Event, RunStatus
from ..model import Run as RunRecord
from ..spool import Sealer, write_run

__all__ = ["CommandNotFound", "Launch", "Outcome", "launch"]

#: Signals passed on to the command (it runs in its own process group, so it hears them once).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: How long to wait for output after the command exits (a grandchild may hold the pipe open).
PUMP_TIMEOUT_S = 10.0


class CommandNotFound(ValueError):
    """The command cannot be run; ``exit_code`` is a shell's: 127 not found, 126 not runnable."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(slots=True)
class Launch:
    """What to run and how to record it (the ``stepwatch run`` options)."""

    command: Sequence[str]
    agent: AgentOptions = field(default_factory=AgentOptions)
    project: str = "default"
    name: str = ""
    store_path: Path = Path("stepwatch.duckdb")
    finish_timeout_s: float = 30.0
    #: After the command, the collector started for it serves on until SIGINT/SIGTERM.
    keep_serving: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the command ended, and where its run lives."""

    run_id: str
    server: str
    status: str
    returncode: int | None
    signal: int | None
    #: The store of the collector started for the run; None when the run went to a given one.
    store: Path | None = None

    @property
    def exit_code(self) -> int:
        """What a shell reports for the command: its code, or 128 + the signal that killed it."""
        if self.signal is not None:
            return 128 + self.signal
        return self.returncode if self.returncode is not None else 1

    def closing(self) -> str:
        """The last word: how the run ended, and how to look at it (again)."""
        ended = f"stepwatch: run {self.run_id} {self.status}"
        if self.store is None:
            return f"{ended}: {run_link(self.server, self.run_id)}"
        return f"{ended}; {look_again(self.store, self.run_id)}"


def _check_runnable(program: str) -> None:
    """Refuse a command as a shell would, before a collector, a run or a file is made."""
    if shutil.which(program) is not None:
        return
    if os.sep not in program:
        raise CommandNotFound(f"{program}: command not found", 127)
    if not os.path.exists(program):
        raise CommandNotFound(f"{program}: no such file", 127)
    raise CommandNotFound(f"{program}: not an executable file", 126)


def _new_run_id(wall: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(wall)) + f"-{uuid.uuid4().hex[:6]}"


def _child_env(options: AgentOptions) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        STEPWATCH_RUN_ID=str(options.run_id),
        STEPWATCH_SERVER=str(options.server),
        STEPWATCH_DIR=str(options.spool_root),
        PYTHONUNBUFFERED="1",
    )
    if options.token:
        env["STEPWATCH_TOKEN"] = options.token
    if options.transport:  # the command's batches take the launcher's broker
        env["STEPWATCH_TRANSPORT"] = options.transport
    if options.encryption_key:  # the command's SDK seals with the launcher's key
        env.pop(ENV_KEY_FILE, None)
        env[ENV_KEY] = options.encryption_key.secret.hex()
    env.update(options.tls.environ())
    return env


@contextmanager
def _forwarding(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """While the command runs, signals sent to us go to it (its own exit decides the status)."""

    def forward(signum: int, frame: FrameType | None) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _status(returncode: int) -> tuple[str, int | None, int | None]:
    if returncode < 0:
        return RunStatus.KILLED, None, -returncode
    return (RunStatus.FINISHED if returncode == 0 else RunStatus.FAILED), returncode, None


def _run_command(
    launch: Launch, agent: Agent, out: BinaryIO, err: BinaryIO
) -> tuple[str, int | None, int | None]:
    parse = launch.agent.parse
    metrics = [MetricLines(parse) if parse is not None else None for _ in ("stdout", "stderr")]
    proc = subprocess.Popen(
        list(launch.command),
        env=_child_env(launch.agent),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0,
    )
    for source in agent.sources:
        if isinstance(source, HostSource):
            source.watch_pid(proc.pid, children=True, returncode=proc.poll, report_exit=False)
    assert proc.stdout is not None and proc.stderr is not None
    streams = ((proc.stdout, "stdout", out), (proc.stderr, "stderr", err))
    pumps = [
        OutputPump(
            pipe,
            stream=name,
            on_event=agent.emit_event,
            echo=echo,
            metrics=lines,
            on_reading=agent.emit,
        ).start()
        for (pipe, name, echo), lines in zip(streams, metrics, strict=True)
    ]
    with _forwarding(proc):
        returncode = proc.wait()
    for pump in pumps:
        pump.join(PUMP_TIMEOUT_S)
    return _status(returncode)


def launch(
    launch: Launch,
    *,
    out: BinaryIO | None = None,
    err: BinaryIO | None = None,
    say: Callable[[str], object] = print,
    wall: Callable[[], float] = time.time,
) -> Outcome:
    """Run ``launch.command`` as a recorded run; return how it ended.

    CommandNotFound, before anything starts, when the command cannot be run.
    """
    _check_runnable(launch.command[0])
    options = launch.agent
    if options.server:
        options = dataclasses.replace(options, run_id=options.run_id or _new_run_id(wall()))
        return _record(dataclasses.replace(launch, agent=options), out, err, say, wall)
    from ..server import CollectorOptions, ServerThread  # only when no collector was given

    # `stepwatch server`'s port when free, so the run's link is the same when its store is served
    # again.
    collector = ServerThread(
        launch.store_path, CollectorOptions(port=DEFAULT_PORT, key=options.encryption_key)
    ).start_or_elsewhere(lambda line: say(f"stepwatch: {line}"))
    try:
        say(f"stepwatch: collector at {collector.url}/ (store {launch.store_path})")
        options = dataclasses.replace(
            options, server=collector.url, run_id=options.run_id or _new_run_id(wall())
        )
        outcome = _record(dataclasses.replace(launch, agent=options), out, err, say, wall)
        if launch.keep_serving:
            link = run_link(collector.url, outcome.run_id)
            say(f"stepwatch: run {outcome.run_id} {outcome.status}; serving {link} until Ctrl-C")
            collector.serve_until_stopped()
    finally:
        collector.stop()
    return dataclasses.replace(outcome, store=launch.store_path)


def _record(
    launch: Launch,
    out: BinaryIO | None,
    err: BinaryIO | None,
    say: Callable[[str], object],
    wall: Callable[[], float],
) -> Outcome:
    options = launch.agent
    record = RunRecord(
        id=str(options.run_id),
        project=launch.project,
        name=launch.name or " ".join(launch.command)[:200],
        config={"command": list(launch.command), "cwd": os.getcwd()},
        start=wall(),
    )
    sealer = Sealer(options.encryption_key) if options.encryption_key else None
    write_run(options.spool_root / record.id, record, sealer)
    agent = open_agent(options, run=record, say=say).start()
    say(f"stepwatch: run {record.id} on {run_link(str(options.server), record.id)}")
    try:
        status, code, sig = _run_command(
            launch, agent, out or sys.stdout.buffer, err or sys.stderr.buffer
        )
    except BaseException:
        agent.stop(launch.finish_timeout_s, _ended(record, RunStatus.FAILED, wall()))
        raise
    ended = _ended(record, status, wall())
    text = f"command exited with {code}" if sig is None else f"command killed by signal {sig}"
    agent.emit_event(Event(wall(), "process_exit", text, {}, {"returncode": code, "signal": sig}))
    write_run(options.spool_root / record.id, ended, sealer)
    if not agent.stop(launch.finish_timeout_s, ended):
        say(f"stepwatch: not all data reached {options.server}; `stepwatch sync` sends the rest")
    return Outcome(record.id, str(options.server), status, code, sig)


def _ended(record: RunRecord, status: str, now: float) -> RunRecord:
    return dataclasses.replace(record, status=status, end=now)
