"""Actions API: the playbook allow-list, requesting a run by hand, approving or rejecting a
pending one, and each action's state and output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ..act import (
    ACTION_STATES,
    Action,
    ActionConflict,
    NotAllowed,
    PlaybookError,
    Remediation,
    UnknownAction,
)
from ..auth import Permission
from ._auth import need
from ._errors import ApiError, error_responses
from ._jsonio import JSON, clean

__all__ = ["actions_router"]

#: ``Remediation.approve`` or ``.reject``: (action id, by, comment) to the decided action.
Decide = Callable[[str, str, str], "Action"]


class RequestIn(BaseModel):
    """A run of an allow-listed playbook on the entity ``labels`` names (node, gpu, run...)."""

    model_config = ConfigDict(extra="forbid")

    playbook: str = Field(min_length=1, max_length=256)
    labels: dict[str, str] = Field(default_factory=dict)
    by: str = Field(default="api", min_length=1, max_length=256)
    dry_run: bool | None = None


class DecisionIn(BaseModel):
    """Who approves or rejects, and why."""

    model_config = ConfigDict(extra="forbid")

    by: str = Field(min_length=1, max_length=256)
    comment: str = Field(default="", max_length=4096)


def _json(action: Action) -> JSON:
    return JSON(clean(action.as_json()))


class _Actions:
    """The actions routes over the collector's remediation; each method is one route."""

    def __init__(self, remediation: Remediation) -> None:
        self.remediation = remediation

    def playbooks(self) -> JSON:
        """The allow-list: what may run, and how."""
        return JSON([p.as_json() for p in self.remediation.playbooks])

    def list_actions(
        self,
        run: str | None = None,
        state: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> JSON:
        """The actions, newest first."""
        if state is not None and state not in ACTION_STATES:
            raise ApiError(400, f"state must be one of {', '.join(ACTION_STATES)}, not {state!r}")
        chosen = [
            a
            for a in self.remediation.actions()
            if (run is None or a.labels.get("run") == run) and (state is None or a.state == state)
        ]
        return JSON([clean(a.as_json()) for a in chosen[:limit]])

    def get(self, action_id: str) -> JSON:
        """One action with its output; 404 for an unknown id."""
        try:
            return _json(self.remediation.get(action_id))
        except UnknownAction:
            raise ApiError(404, f"unknown action {action_id!r}") from None

    async def request(self, body: RequestIn) -> JSON:
        """Request a run by hand: 403 outside the allow-list, 400 for unfit labels."""
        return await run_in_threadpool(self._request, body)

    def _request(self, body: RequestIn) -> JSON:
        try:
            action = self.remediation.request(
                body.playbook, body.labels, body.by, dry_run=body.dry_run
            )
        except NotAllowed as exc:
            raise ApiError(403, str(exc)) from None
        except PlaybookError as exc:
            raise ApiError(400, str(exc)) from None
        return _json(action)

    async def approve(self, action_id: str, body: DecisionIn) -> JSON:
        """Let a pending action run; 409 when it is not pending."""
        return await run_in_threadpool(self._decide, self.remediation.approve, action_id, body)

    async def reject(self, action_id: str, body: DecisionIn) -> JSON:
        """Refuse a pending action; 409 when it is not pending."""
        return await run_in_threadpool(self._decide, self.remediation.reject, action_id, body)

    @staticmethod
    def _decide(decide: Decide, action_id: str, body: DecisionIn) -> JSON:
        try:
            return _json(decide(action_id, body.by, body.comment))
        except UnknownAction:
            raise ApiError(404, f"unknown action {action_id!r}") from None
        except ActionConflict as exc:
            raise ApiError(409, str(exc)) from None


def actions_router(remediation: Remediation) -> APIRouter:
    """The actions and playbooks routes over ``remediation``."""
    actions = _Actions(remediation)
    router = APIRouter(prefix="/api/v1", responses=error_responses(409))
    read, operate = [need(Permission.READ)], [need(Permission.OPERATE)]
    router.add_api_route("/playbooks", actions.playbooks, methods=["GET"], dependencies=read)
    router.add_api_route("/actions", actions.list_actions, methods=["GET"], dependencies=read)
    router.add_api_route("/actions", actions.request, methods=["POST"], dependencies=operate)
    router.add_api_route("/actions/{action_id}", actions.get, methods=["GET"], dependencies=read)
    for verb, decide in (("approve", actions.approve), ("reject", actions.reject)):
        path = f"/actions/{{action_id}}/{verb}"
        router.add_api_route(path, decide, methods=["POST"], dependencies=operate)
    return router
