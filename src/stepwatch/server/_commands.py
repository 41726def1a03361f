"""Commands API: queue a command for a run, let its SDK poll for new ones, take its answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ..act import CommandBook, CommandError
from ..auth import Identity, Permission
from ..model import RunStatus
from ._auth import Ingester, Need, Operator
from ._errors import ApiError, error_responses
from ._event_log import EventLog
from ._jsonio import JSON
from ._scope import Scope

__all__ = ["commands_router"]


class CommandIn(BaseModel):
    """A command as a person (or a script) sends it."""

    model_config = ConfigDict(extra="forbid")

    action: str = Field(max_length=64)
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str = Field(default="", max_length=4096)
    #: The ranks it is for (``profile`` only); none: every rank.
    ranks: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, max_length=4096)


class AckIn(BaseModel):
    """A run's answer to one command."""

    model_config = ConfigDict(extra="forbid")

    result: Literal["ok", "failed", "unsupported"]
    detail: str = Field(default="", max_length=4096)
    step: int | None = Field(default=None, ge=0)
    #: Who answers a command naming ranks: one of them.
    rank: int | None = Field(default=None, ge=0)


#: The run's SDK, and people looking.
Poller = Annotated[Identity, Depends(Need(Permission.WRITE, Permission.READ))]


class _Commands:
    """The command routes over the collector's book, the caller's runs and its log."""

    def __init__(self, book: CommandBook, scope: Scope, log: EventLog) -> None:
        self.book, self.scope, self.log = book, scope, log

    async def issue(self, who: Operator, run_id: str, body: CommandIn) -> JSON:
        """Queue a command; 400 for an unknown action or bad arguments, 409 for a run that has
        ended and will never poll again (nothing is queued)."""
        return await run_in_threadpool(self._issue, who, run_id, body)

    def _issue(self, who: Identity, run_id: str, body: CommandIn) -> JSON:
        run = self.scope.run(who, run_id)
        if run.status != RunStatus.RUNNING:
            raise ApiError(409, f"run {run_id!r} is {run.status}: it takes no more commands")
        try:
            command, events = self.book.issue(
                run_id, body.action, body.args, by=who.actor, reason=body.reason,
                ranks=body.ranks,
            )  # fmt: skip
        except CommandError as exc:
            raise ApiError(400, str(exc)) from None
        self.log.write(events)
        return JSON(command.as_json(), status_code=201)

    def poll(
        self,
        who: Poller,
        run_id: str,
        after: Annotated[int, Query(ge=0)] = 0,
        status: Literal["pending", "all"] = "all",
    ) -> JSON:
        """The run's commands numbered above ``after`` (the SDK sends the last it saw)."""
        self.scope.run(who, run_id)
        chosen = self.book.after(run_id, after)
        if status == "pending":
            chosen = [c for c in chosen if c.pending]
        return JSON([c.as_json() for c in chosen])

    async def ack(self, who: Ingester, run_id: str, command_id: str, body: AckIn) -> JSON:
        """Record the result (of ``rank``, one of those a command names); a repeated identical
        answer is fine, a different one, or one from a rank it is not for, is 409."""
        return await run_in_threadpool(self._ack, who, run_id, command_id, body)

    def _ack(self, who: Identity, run_id: str, command_id: str, body: AckIn) -> JSON:
        self.scope.run(who, run_id)
        try:
            command, events = self.book.ack(
                run_id, command_id, body.result, detail=body.detail, step=body.step,
                by=who.actor, rank=body.rank,
            )  # fmt: skip
        except KeyError:
            raise ApiError(404, f"unknown command {command_id!r} of run {run_id!r}") from None
        except CommandError as exc:
            raise ApiError(409, str(exc)) from None
        if events:
            self.log.write(events)
        return JSON(command.as_json())


def commands_router(book: CommandBook, scope: Scope, log: EventLog) -> APIRouter:
    """The command routes of every run the caller sees."""
    commands = _Commands(book, scope, log)
    router = APIRouter(prefix="/api/v1/runs/{run_id}/commands", responses=error_responses(409))
    router.add_api_route("", commands.issue, methods=["POST"], status_code=201)
    router.add_api_route("", commands.poll, methods=["GET"])
    router.add_api_route("/{command_id}/ack", commands.ack, methods=["POST"])
    return router
