"""Training control in the training process: commands from the collector, applied between steps.

A background thread polls the collector for the run's new commands and posts
the answers; the training thread only drains an in-memory queue at each step
boundary, applies each command through the framework adapter's handler and
queues its answer. A collector that is down only delays commands: nothing in
the training thread ever waits on the network.
"""

from __future__ import annotations

import _thread
import logging
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._periodic import Periodic
from ..spool import AuthError, Backoff, HttpClient, TransportError
from ._run import Run

__all__ = ["OK", "FAILED", "UNSUPPORTED", "Command", "CommandPoller", "Controller", "Outcome"]

log = logging.getLogger("stepwatch.sdk")

#: A run's answers to a command.
OK, FAILED, UNSUPPORTED = "ok", "failed", "unsupported"


@dataclass(frozen=True, slots=True)
class Command:
    """A command as the run receives it: for every rank, or for ``ranks`` only (of which
    those in ``answered`` have applied it already)."""

    id: str
    seq: int
    action: str
    args: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    ranks: tuple[int, ...] = ()
    answered: frozenset[int] = frozenset()

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Command:
        args = doc.get("args") or {}
        return cls(
            str(doc["id"]),
            int(doc["seq"]),
            str(doc["action"]),
            {str(k): float(v) for k, v in args.items()},
            str(doc.get("reason", "")),
            tuple(int(r) for r in doc.get("ranks") or ()),
            frozenset(int(r) for r in doc.get("answers") or {}),
        )

    def due(self, rank: str) -> bool:
        """Whether the process of ``rank`` (its label) is to apply this command."""
        return not self.ranks or (
            rank.isdecimal() and int(rank) in self.ranks and int(rank) not in self.answered
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """What applying a command did: ``ok``, ``failed`` or ``unsupported``, and why."""

    result: str
    detail: str = ""


class Client(Protocol):
    """The part of ``spool.HttpClient`` the poller uses."""

    def get(self, path: str) -> Any: ...

    def post_json(self, path: str, doc: dict[str, Any]) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Ack:
    command: Command
    outcome: Outcome
    step: int | None
    rank: int | None


class CommandPoller:
    """Polls ``GET /api/v1/runs/{run}/commands?after=SEQ`` and posts acknowledgements, on its
    own thread; ``take`` and ``ack`` never block.

    Args:
        client: the collector connection (used by this thread only).
        run_id: whose commands.
        interval_s: time between polls.
        backoff: delays after failures (a collector down or refusing).
    """

    def __init__(
        self,
        client: Client,
        run_id: str,
        *,
        interval_s: float = 1.0,
        backoff: Backoff | None = None,
    ) -> None:
        self._client, self._path = client, f"/api/v1/runs/{run_id}/commands"
        self._interval, self._backoff = interval_s, backoff or Backoff(interval_s, 30.0)
        self._after = 0
        self._seen: set[str] = set()
        self._new: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._acks: queue.SimpleQueue[_Ack] = queue.SimpleQueue()
        self._unsent: list[_Ack] = []
        self._delay = interval_s
        self._worker = Periodic(
            self._round,
            interval_s,
            name=f"stepwatch-control-{run_id}",
            failed="stepwatch: the command poller failed; carrying on",
            log=log,
            at_start=True,
            at_stop=True,  # one last try to post the answers still queued
            next_in=lambda: self._delay,
        )
        self.polls = self.failures = 0

    def start(self) -> CommandPoller:
        self._worker.start()
        return self

    def take(self) -> list[Command]:
        """The commands received since the last call, in order."""
        out = []
        while True:
            try:
                out.append(self._new.get_nowait())
            except queue.Empty:
                return out

    def ack(
        self, command: Command, outcome: Outcome, step: int | None, rank: int | None = None
    ) -> None:
        """Queue the answer to ``command`` (as ``rank``, for one naming ranks); the thread
        posts it (and retries it) in order."""
        self._acks.put(_Ack(command, outcome, step, rank))
        self._worker.wake()

    def close(self) -> None:
        """Stop polling after one last try to post the answers still queued."""
        self._worker.stop()
        self._client.close()

    def _round(self) -> None:
        """Post the answers queued, then poll (not once closing); back off while it fails."""
        closing = self._worker.stopping  # read first: every answer queued before close() goes out
        try:
            self._send_acks()
            if not closing:
                self._poll()
        except TransportError as exc:
            self.failures += 1
            self._delay = delay = self._backoff.next()
            level = logging.WARNING if isinstance(exc, AuthError) else logging.DEBUG
            log.log(level, "stepwatch: command poll failed (%s); retrying in %.1fs", exc, delay)
        else:
            self._backoff.reset()
            self._delay = self._interval

    def _poll(self) -> None:
        reply = self._client.get(f"{self._path}?after={self._after}")
        self.polls += 1
        if reply.status >= 400:
            if reply.status in (401, 403):
                raise AuthError(f"the collector refused the token ({reply.status})")
            if reply.retryable:
                raise TransportError(f"the collector answered {reply.status}")
            return  # the run is not registered yet (404): nothing to do
        for doc in reply.body.get("value", []):
            try:
                command = Command.of(doc)
            except (KeyError, TypeError, ValueError, AttributeError):
                log.warning("stepwatch: skipping a command the SDK cannot read: %r", doc)
                continue
            self._after = max(self._after, command.seq)
            if doc.get("status") == "pending" and command.id not in self._seen:
                self._seen.add(command.id)
                self._new.put(command)

    def _send_acks(self) -> None:
        while True:
            try:
                self._unsent.append(self._acks.get_nowait())
            except queue.Empty:
                break
        while self._unsent:
            item = self._unsent[0]
            body = {
                "result": item.outcome.result,
                "detail": item.outcome.detail[:4000],
                "step": item.step,
            } | ({} if item.rank is None else {"rank": item.rank})
            reply = self._client.post_json(f"{self._path}/{item.command.id}/ack", body)
            if reply.retryable:
                raise TransportError(f"the collector answered {reply.status}")
            if reply.status >= 400:
                log.warning(
                    "stepwatch: the collector refused the answer to %s (%d): %s",
                    item.command.action, reply.status, reply.body.get("error", ""),
                )  # fmt: skip
            self._unsent.pop(0)


#: Applies one command at ``step`` on the training thread.
Handler = Callable[[Command, int], Outcome]


def _interrupt_main() -> None:
    _thread.interrupt_main()


class Controller:
    """Applies a run's commands at step boundaries through ``handlers`` (by action).

    A command without a handler is answered ``unsupported``; a handler that raises is
    ``failed`` with the error. A command naming ranks is applied by those ranks alone, each
    answering for itself; any other by every rank, rank 0 answering (each rank records a
    ``command_applied`` event with its own result). After a ``stop`` command is
    applied, ``stop_requested`` is true and a timer calls ``hard_stop`` (default:
    KeyboardInterrupt in the main thread) unless ``close()`` comes within the command's
    ``timeout_s``.

    Args:
        run: whose commands (its collector and token).
        handlers: the framework adapter's appliers, by action.
        poller: the command source; by default one polling the run's collector (none when
            the run has no collector: commands then never arrive).
        interval_s: poll interval of the default poller.
        hard_stop: what ends the process when a graceful stop takes too long.
    """

    def __init__(
        self,
        run: Run,
        handlers: Mapping[str, Handler],
        *,
        poller: CommandPoller | None = None,
        interval_s: float = 1.0,
        hard_stop: Callable[[], None] = _interrupt_main,
    ) -> None:
        self.run, self._handlers, self._hard_stop = run, dict(handlers), hard_stop
        if poller is None and run.server:
            timeout_s = max(5.0, interval_s)
            client = HttpClient(run.server, run.token, timeout_s=timeout_s, tls=run.tls)
            poller = CommandPoller(client, run.id, interval_s=interval_s)
        self._poller = poller.start() if poller is not None else None
        self._rank = run.labels.get("rank", "0")
        self.applied: list[tuple[Command, Outcome]] = []
        self.stop_requested = False
        self._timer: threading.Timer | None = None
        self.closed = False

    def boundary(self, step: int) -> list[tuple[Command, Outcome]]:
        """Apply every command received so far, in order; returns what each did."""
        if self._poller is None or self.closed:
            return []
        done = []
        for command in self._poller.take():
            if not command.due(self._rank):
                continue  # named other ranks, or this one answered it already (before a restart)
            outcome = self._apply(command, step)
            if command.ranks:
                self._poller.ack(command, outcome, step, int(self._rank))
            elif self._rank == "0":
                self._poller.ack(command, outcome, step)
            text = f"{command.action}: {outcome.result}"
            self.run.event(
                "command_applied", text + (f" ({outcome.detail})" if outcome.detail else ""),
                id=command.id, action=command.action, result=outcome.result, step=step,
            )  # fmt: skip
            done.append((command, outcome))
        self.applied += done
        return done

    def _apply(self, command: Command, step: int) -> Outcome:
        handler = self._handlers.get(command.action)
        if handler is None:
            return Outcome(UNSUPPORTED, f"this training loop cannot {command.action}")
        try:
            outcome = handler(command, step)
        except Exception as exc:
            log.exception("stepwatch: applying %s failed", command.action)
            return Outcome(FAILED, f"{type(exc).__name__}: {exc}")
        if command.action == "stop" and outcome.result == OK:
            self._arm_hard_stop(command.args.get("timeout_s", 300.0))
        return outcome

    def _arm_hard_stop(self, timeout_s: float) -> None:
        self.stop_requested = True
        if self._timer is None:
            self._timer = threading.Timer(timeout_s, self._stop_now)
            self._timer.name, self._timer.daemon = "stepwatch-hard-stop", True
            self._timer.start()

    def _stop_now(self) -> None:
        if not self.closed:
            log.warning("stepwatch: the training did not stop in time; stopping it now")
            self._hard_stop()

    def close(self) -> None:
        """Stop polling (posting the answers still queued) and disarm the hard stop."""
        if self.closed:
            return
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            if self._timer.is_alive():
                self._timer.join()
        if self._poller is not None:
            self._poller.close()
