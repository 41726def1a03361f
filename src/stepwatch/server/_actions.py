"""Actions API: the playbook allow-list, requesting a run by hand, approving or rejecting a
pending one, and each action's state and output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request
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
from ..auth import ANONYMOUS, Identity
from ..store import ActionQuery
from ._auth import Admin, Operator, Reader
from ._errors import ApiError, error_responses
from ._jsonio import JSON, clean
from ._paging import page, paged
from ._scope import Scope

__all__ = ["actions_router"]

#: ``Remediation.approve`` or ``.reject``: (action id, by, comment) to the decided action.
Decide = Callable[[str, str, str], "Action"]


class RequestIn(BaseModel):
    """A run of an allow-listed playbook on the entity ``labels`` names (node, gpu, run...)."""

    model_config = ConfigDict(extra="forbid")

    playbook: str = Field(min_length=1, max_length=256)
    labels: dict[str, str] = Field(default_factory=dict)
    dry_run: bool | None = None


class DecisionIn(BaseModel):
    """Why (who approves or rejects is the caller's identity)."""

    model_config = ConfigDict(extra="forbid")

    comment: str = Field(default="", max_length=4096)


def _json(action: Action) -> JSON:
    return JSON(clean(action.as_json()))


class _Actions:
    """The actions routes over the collector's remediation; each method is one route."""

    def __init__(self, remediation: Remediation, scope: Scope) -> None:
        self.remediation, self.scope = remediation, scope

    def playbooks(self, who: Reader) -> JSON:
        """The allow-list: what may run, and how."""
        return JSON([p.as_json() for p in self.remediation.playbooks])

    def list_actions(
        self,
        who: Reader,
        request: Request,
        run: str | None = None,
        state: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
    ) -> JSON:
        """The actions of the caller's projects as they stand, newest request first; a page
        of ``limit``, the next page's cursor in the ``X-Next-Cursor`` header."""
        if state is not None and state not in ACTION_STATES:
            raise ApiError(400, f"state must be one of {', '.join(ACTION_STATES)}, not {state!r}")
        query = ActionQuery(run, None if state is None else {state}, who.projects)
        got = page(lambda at: self.scope.store.current.actions(query, at, limit), cursor)
        return paged([clean(d) for d in got.items], got.cursor, request)

    def _action(self, who: Identity, action_id: str) -> Action:
        """The action, when it is of the caller's projects; else 404 as for an unknown id."""
        try:
            found = self.scope.store.current.action(action_id)
            action = None if found is None else Action.from_json(found)
        except ValueError:
            action = None  # a record in a shape this version does not read
        if action is None or not self.scope.sees(who, action.labels):
            raise ApiError(404, f"unknown action {action_id!r}")
        return action

    def get(self, who: Reader, action_id: str) -> JSON:
        """One action with its output; 404 for an unknown id."""
        return _json(self._action(who, action_id))

    async def request(self, who: Operator, body: RequestIn) -> JSON:
        """Request a run by hand: 403 outside the allow-list, 400 for unfit labels."""
        return await run_in_threadpool(self._request, who, body)

    def _request(self, who: Identity, body: RequestIn) -> JSON:
        run = body.labels.get("run")
        if who.projects is not None:  # one of a project's operators acts on its runs only
            if run is None:
                raise ApiError(403, f"{who.name} may only act on runs: name one in labels.run")
            self.scope.run(who, run)
        try:
            action = self.remediation.request(
                body.playbook, body.labels, who.actor, dry_run=body.dry_run
            )
        except NotAllowed as exc:
            raise ApiError(403, str(exc)) from None
        except PlaybookError as exc:
            raise ApiError(400, str(exc)) from None
        return _json(action)

    async def approve(self, who: Admin, action_id: str, body: DecisionIn) -> JSON:
        """One approval of a pending action, by an admin other than its requester (and other
        than its approvers so far); 409 when it is not pending."""
        if who == ANONYMOUS:
            raise ApiError(
                403,
                "approvals need identities: start the collector with --auth, and approve "
                "with an admin token other than the requester's",
            )
        return await run_in_threadpool(self._decide, self.remediation.approve, who, action_id, body)

    async def reject(self, who: Operator, action_id: str, body: DecisionIn) -> JSON:
        """Refuse a pending action; 409 when it is not pending."""
        return await run_in_threadpool(self._decide, self.remediation.reject, who, action_id, body)

    def _decide(self, decide: Decide, who: Identity, action_id: str, body: DecisionIn) -> JSON:
        self._action(who, action_id)
        try:
            return _json(decide(action_id, who.actor, body.comment))
        except UnknownAction:
            raise ApiError(404, f"unknown action {action_id!r}") from None
        except NotAllowed as exc:
            raise ApiError(403, str(exc)) from None
        except ActionConflict as exc:
            raise ApiError(409, str(exc)) from None


def actions_router(remediation: Remediation, scope: Scope) -> APIRouter:
    """The actions and playbooks routes over ``remediation``, limited to the caller's
    projects."""
    actions = _Actions(remediation, scope)
    router = APIRouter(prefix="/api/v1", responses=error_responses(409))
    router.add_api_route("/playbooks", actions.playbooks, methods=["GET"])
    router.add_api_route("/actions", actions.list_actions, methods=["GET"])
    router.add_api_route("/actions", actions.request, methods=["POST"])
    router.add_api_route("/actions/{action_id}", actions.get, methods=["GET"])
    router.add_api_route("/actions/{action_id}/approve", actions.approve, methods=["POST"])
    router.add_api_route("/actions/{action_id}/reject", actions.reject, methods=["POST"])
    return router
