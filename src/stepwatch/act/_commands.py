"""Training control on the collector's side: the queue of commands for each run.

A command (lower the learning rate, checkpoint, skip non-finite updates, roll
back, stop, profile) is issued by a person or a policy, picked up by the run's SDK when
it polls, applied between two steps and acknowledged with its result. Commands
and acknowledgements are store records, folded into the store's command table,
from which the queue is rebuilt when the collector restarts; each also makes an
audit record.

A command may name the ranks it is for (``profile`` only: see ``RANK_ACTIONS``): each of
them answers for itself, and the command stays pending until all have; every answer's
record carries those given so far, so a restart loses none.
"""

from __future__ import annotations

import bisect
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import astuple, dataclass, field, replace
from typing import Any

from ..model import Event
from ._audit import AuditRecord
from ._policies import COMMAND_ACTIONS
from ._policies import command_args as checked_args
from ._policies import command_ranks as checked_ranks

__all__ = [
    "ACK_RESULTS",
    "Answer",
    "COMMAND_ACK_EVENT",
    "COMMAND_ACTIONS",
    "COMMAND_EVENT",
    "Command",
    "CommandBook",
    "CommandError",
    "command_args",
    "command_ranks",
]

#: Event kinds of a command and of its acknowledgement in the store.
COMMAND_EVENT = "command"
COMMAND_ACK_EVENT = "command_ack"
#: How a run answers a command.
ACK_RESULTS = ("ok", "failed", "unsupported")
PENDING = "pending"


class CommandError(ValueError):
    """A command or acknowledgement refused: its message says what is wrong."""


def command_args(action: str, given: Mapping[str, object] | None = None) -> dict[str, float]:
    """The arguments of ``action`` with defaults filled in; CommandError for anything wrong."""
    try:
        return checked_args(action, given)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def command_ranks(action: str, ranks: Iterable[object] = ()) -> tuple[int, ...]:
    """The ranks ``action`` is for, sorted (none: every rank); CommandError when wrong."""
    try:
        return checked_ranks(action, ranks)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Answer:
    """One rank's answer to a command that names its ranks."""

    result: str
    detail: str = ""
    step: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"result": self.result, "detail": self.detail, "step": self.step}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Answer:
        step = d.get("step")
        return cls(
            str(d["result"]), str(d.get("detail") or ""), None if step is None else int(step)
        )


def _overall(answers: Mapping[int, Answer]) -> Answer:
    """The command's answer once every rank it names gave theirs: ``ok`` only if all did, else
    the first rank's failure (or ``unsupported``); each rank's detail, the first step."""
    results = [a.result for a in answers.values()]
    result = next((r for r in ("failed", "unsupported") if r in results), "ok")
    detail = "; ".join(f"rank {r}: {a.result}" + (f" ({a.detail})" if a.detail else "")
                       for r, a in sorted(answers.items()))  # fmt: skip
    steps = [a.step for a in answers.values() if a.step is not None]
    return Answer(result, detail, min(steps) if steps else None)


@dataclass(frozen=True, slots=True)
class Command:
    """One command for one run; ``status`` is ``pending`` until the run acknowledges it (for
    a command naming ``ranks``, until each of them has: ``answers`` holds theirs)."""

    id: str
    seq: int
    run: str
    action: str
    args: dict[str, float]
    ts: float
    by: str = ""
    reason: str = ""
    alert_id: str = ""
    kind: str = ""
    status: str = PENDING
    detail: str = ""
    step: int | None = None
    acked_ts: float | None = None
    ranks: tuple[int, ...] = ()
    answers: dict[int, Answer] = field(default_factory=dict)

    @property
    def pending(self) -> bool:
        return self.status == PENDING

    def describe(self) -> str:
        """``lower_lr(factor=0.5)``, ``profile(steps=5) on ranks 3, 5``: how audit records and
        logs name it."""
        args = ", ".join(f"{k}={v:g}" for k, v in self.args.items())
        ranks = ", ".join(map(str, self.ranks))
        where = f" on rank{'s' if len(self.ranks) > 1 else ''} {ranks}" if self.ranks else ""
        return f"{self.action}({args}){where}"

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "seq": self.seq,
            "run": self.run,
            "action": self.action,
            "args": dict(self.args),
            "ts": self.ts,
            "by": self.by,
            "reason": self.reason,
            "alert_id": self.alert_id,
            "kind": self.kind,
            "status": self.status,
            "detail": self.detail,
            "step": self.step,
            "acked_ts": self.acked_ts,
            "ranks": list(self.ranks),
            "answers": {str(r): a.as_json() for r, a in self.answers.items()},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Command:
        """Back from ``as_json``; KeyError, TypeError or ValueError for another shape."""
        return cls(
            id=str(d["id"]), seq=int(d["seq"]), run=str(d["run"]), action=str(d["action"]),
            args={str(k): float(v) for k, v in dict(d["args"]).items()}, ts=float(d["ts"]),
            by=str(d.get("by", "")), reason=str(d.get("reason", "")),
            alert_id=str(d.get("alert_id", "")), kind=str(d.get("kind", "")),
            status=str(d.get("status", PENDING)), detail=str(d.get("detail") or ""),
            step=None if d.get("step") is None else int(d["step"]),
            acked_ts=None if d.get("acked_ts") is None else float(d["acked_ts"]),
            ranks=tuple(int(r) for r in d.get("ranks") or ()),
            answers={int(r): Answer.from_json(a) for r, a in dict(d.get("answers") or {}).items()},
        )  # fmt: skip

    def to_event(self) -> Event:
        data = self.as_json()
        for key in ("status", "detail", "step", "acked_ts", "answers"):
            data.pop(key)
        return Event(self.ts, COMMAND_EVENT, self.describe(), {"run": self.run}, data)

    def audit(self, actor: str, result: str, what: str) -> AuditRecord:
        return AuditRecord(
            "command",
            actor,
            what,
            result,
            labels={"run": self.run},
            alert_id=self.alert_id,
            kind=self.kind,
            detail={"command": self.id, "seq": self.seq, "args": dict(self.args)}
            | ({"ranks": list(self.ranks)} if self.ranks else {})
            | ({"reason": self.detail} if self.detail else {})
            | ({"step": self.step} if self.step is not None else {}),
        )


@dataclass(slots=True)
class _RunQueue:
    commands: list[Command] = field(default_factory=list)  # by seq
    by_id: dict[str, int] = field(default_factory=dict)  # id -> index


class CommandBook:
    """Every run's commands in seq order. Methods return the events to store (the caller
    writes them: an API call waits for them, the policy engine does not).

    Args:
        clock: wall time of commands and acknowledgements.
        new_id: a fresh command id.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex[:16],
    ) -> None:
        self._clock, self._new_id = clock, new_id
        self._runs: dict[str, _RunQueue] = {}
        self._lock = threading.Lock()

    def restore(self, commands: Iterable[Mapping[str, Any]]) -> None:
        """Take back the commands a previous life stored, in ``Command.as_json``'s shape
        (the store's command rows); one in another shape is not ours and is left out."""
        for row in commands:
            try:
                command = Command.from_json(row)
            except (KeyError, TypeError, ValueError):
                continue
            with self._lock:
                queue = self._runs.setdefault(command.run, _RunQueue())
                if command.id not in queue.by_id:
                    self._insert(queue, command)

    @staticmethod
    def _insert(queue: _RunQueue, command: Command) -> None:
        seqs = [c.seq for c in queue.commands]
        at = bisect.bisect(seqs, command.seq)
        queue.commands.insert(at, command)
        queue.by_id = {c.id: i for i, c in enumerate(queue.commands)}

    def issue(
        self,
        run: str,
        action: str,
        args: Mapping[str, object] | None = None,
        *,
        by: str,
        reason: str = "",
        alert_id: str = "",
        kind: str = "",
        ranks: Iterable[object] = (),
    ) -> tuple[Command, list[Event]]:
        """Queue a command for ``run`` (for ``ranks`` only, when given); CommandError (and
        nothing queued) for a bad one."""
        checked = command_args(action, args)
        chosen = command_ranks(action, ranks)
        now = self._clock()
        with self._lock:
            queue = self._runs.setdefault(run, _RunQueue())
            seq = queue.commands[-1].seq + 1 if queue.commands else 1
            command = Command(
                self._new_id(), seq, run, action, checked, now, by, reason, alert_id, kind,
                ranks=chosen,
            )  # fmt: skip
            self._insert(queue, command)
        audit = command.audit(by or "api", PENDING, f"issued {command.describe()}")
        return command, [command.to_event(), audit.to_event(now)]

    def after(self, run: str, seq: int = 0) -> list[Command]:
        """The run's commands numbered above ``seq``, in order (acknowledged ones too)."""
        with self._lock:
            queue = self._runs.get(run)
            if queue is None:
                return []
            at = bisect.bisect([c.seq for c in queue.commands], seq)
            return queue.commands[at:]

    def get(self, run: str, command_id: str) -> Command | None:
        with self._lock:
            queue = self._runs.get(run)
            if queue is None or command_id not in queue.by_id:
                return None
            return queue.commands[queue.by_id[command_id]]

    def ack(
        self,
        run: str,
        command_id: str,
        result: str,
        *,
        detail: str = "",
        step: int | None = None,
        by: str = "",
        rank: int | None = None,
    ) -> tuple[Command, list[Event]]:
        """Record the run's answer (``rank``'s, for a command naming ranks; ignored for one
        that names none). The same answer again (a retry) changes nothing and returns no
        events; KeyError for an unknown command, CommandError for a bad result, a rank the
        command is not for, or a different answer to an answered command."""
        if result not in ACK_RESULTS:
            raise CommandError(f"result must be one of {', '.join(ACK_RESULTS)}, not {result!r}")
        now = self._clock()
        given = Answer(result, detail, step)
        with self._lock:
            queue = self._runs.get(run)
            if queue is None or command_id not in queue.by_id:
                raise KeyError(command_id)
            index = queue.by_id[command_id]
            before = queue.commands[index]
            command = self._answered(before, given, rank, now)
            if command is None:
                return before, []
            queue.commands[index] = command
        data = {"id": command.id, "run": run, "result": command.status,
                "detail": command.detail, "step": command.step}  # fmt: skip
        who = ""
        if command.ranks:
            data |= {"rank": rank, "answers": command.as_json()["answers"]}
            who = f"rank {rank} "
        text = f"{command.describe()}: {who}{result}" + (f" ({detail})" if detail else "")
        ack_event = Event(now, COMMAND_ACK_EVENT, text, {"run": run}, data)
        audit = command.audit(by or f"run:{run}", result, f"{who}applied {command.describe()}")
        return command, [ack_event, audit.to_event(now)]

    @staticmethod
    def _answered(before: Command, given: Answer, rank: int | None, now: float) -> Command | None:
        """``before`` with ``given`` taken in; None for a retry of the answer it has."""
        if not before.ranks:
            if not before.pending:
                if (before.status, before.detail, before.step) == astuple(given):
                    return None
                raise CommandError(f"command {before.id} was already answered {before.status!r}")
            return replace(before, status=given.result, detail=given.detail, step=given.step,
                           acked_ts=now)  # fmt: skip
        if rank not in before.ranks:
            ranks = ", ".join(map(str, before.ranks))
            raise CommandError(f"command {before.id} is for ranks {ranks}: answer as one of them")
        had = before.answers.get(rank)
        if had is not None:
            if had == given:
                return None
            raise CommandError(
                f"command {before.id} was already answered {had.result!r} by rank {rank}"
            )
        answers = {**before.answers, rank: given}
        if len(answers) < len(before.ranks):
            return replace(before, answers=answers)
        overall = _overall(answers)
        return replace(before, answers=answers, status=overall.result, detail=overall.detail,
                       step=overall.step, acked_ts=now)  # fmt: skip
