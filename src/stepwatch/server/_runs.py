"""Runs API: create or update a run, list and read runs, mark one finished."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from ..auth import Identity, Permission
from ..model import MAX_ABS_TS_S, MAX_INT64, Run, RunStatus
from ._auth import Ingester, Need, Reader
from ._errors import ApiError
from ._jsonio import JSON, clean
from ._scope import Scope, unknown_run

__all__ = ["runs_router"]

_ID = Field(default=None, pattern=r"^[^/\s]{1,256}$")
#: A run's start or end: a time the store holds (see ``model.is_timestamp``).
_TIME = Field(default=None, ge=-MAX_ABS_TS_S, le=MAX_ABS_TS_S)


class RunIn(BaseModel):
    """A run as clients send it; every field but ``id`` is optional on update."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = _ID
    project: str | None = None
    name: str | None = None
    config: dict[str, Any] | None = None
    status: str | None = None
    start: float | None = _TIME
    labels: dict[str, str] | None = None
    planned_total_steps: int | None = Field(default=None, ge=0, le=MAX_INT64)


class FinishIn(BaseModel):
    """How a run ended, and when (default: now, as the store's clock says)."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["finished", "failed", "killed"]
    end: float | None = _TIME


def _run_json(run: Run) -> dict[str, Any]:
    return clean(run.as_dict())  # type: ignore[no-any-return]


def merge_run(existing: Run | None, update: RunIn, new_id: str, now: float) -> Run:
    """Apply the fields a client sent onto the stored run (or a fresh one started ``now``).

    Every rank registers the run, so an empty field never erases what another
    rank said, and the run starts when its earliest rank did.
    """
    fields = update.model_dump(exclude_unset=True, exclude={"id"})
    if fields.get("status", RunStatus.RUNNING) not in RunStatus.ALL:
        raise ApiError(400, f"status must be one of {', '.join(RunStatus.ALL)}")
    base = existing or Run(id=new_id, start=now)
    given = {k: v for k, v in fields.items() if v is not None and v != "" and v != {}}
    if existing is not None and "start" in given:
        given["start"] = min(given["start"], existing.start)
    return dataclasses.replace(base, **given)


#: Who may end a run: its SDK, or a person who knows better.
Ender = Annotated[Identity, Depends(Need(Permission.WRITE, Permission.OPERATE))]


def _project(who: Identity, existing: Run | None, asked: str | None) -> str:
    """The project a new or updated run belongs to. A run moves only between projects the
    caller has both of (``stepwatch run`` registers it before its ranks name their project)."""
    if existing is not None:
        if asked and asked != existing.project and not who.sees(asked):
            raise ApiError(
                409, f"run {existing.id!r} belongs to project {existing.project!r}: it cannot move"
            )
        return asked or existing.project
    if asked:
        project = asked
    elif who.projects is not None and len(who.projects) == 1:
        (project,) = who.projects  # a token of one project makes its runs there
    else:
        project = Run("").project  # the project of a run that names none
    if not who.sees(project):
        raise ApiError(403, f"{who.name} may not create runs in project {project!r}")
    return project


class _Runs:
    """The runs routes over a store; ``clock`` dates runs created without a start, and
    ``finished`` hears of each run that ends (its alerts resolve)."""

    def __init__(
        self, scope: Scope, clock: Callable[[], float], finished: Callable[[Run], None]
    ) -> None:
        self.scope, self.store = scope, scope.store
        self.clock = clock
        self.finished = finished

    def upsert(self, who: Ingester, run: RunIn) -> JSON:
        """Create a run (an id is generated when missing) or update the fields given; a run
        of another project answers as an unknown one would, and no run changes project."""
        run_id = run.id or uuid.uuid4().hex
        existing = self.store.get_run(run_id)
        if existing is not None and not who.sees(existing.project):
            raise ApiError(409, f"run id {run_id!r} is taken: choose another")
        run = run.model_copy(update={"project": _project(who, existing, run.project)})
        merged = merge_run(existing, run, run_id, self.clock())
        self.store.upsert_run(merged)
        self.scope.remember(merged)
        return JSON(_run_json(merged))

    def list_runs(self, who: Reader, project: str | None = None, status: str | None = None) -> JSON:
        """Runs of the caller's projects, optionally of one project and/or in one status."""
        found = self.store.list_runs(project=project, status=status)
        return JSON([_run_json(r) for r in found if who.sees(r.project)])

    def get_run(self, who: Reader, run_id: str) -> JSON:
        """One run, or 404."""
        return JSON(_run_json(self.scope.run(who, run_id)))

    def finish(self, who: Ender, run_id: str, body: FinishIn) -> JSON:
        """Mark a run finished, failed or killed; its open alerts are resolved."""
        self.scope.run(who, run_id)
        try:
            run = self.store.finish_run(run_id, body.status, end=body.end)
        except KeyError:
            raise unknown_run(run_id) from None
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        self.finished(run)
        return JSON(_run_json(run))


def runs_router(
    scope: Scope, clock: Callable[[], float], finished: Callable[[Run], None] = lambda run: None
) -> APIRouter:
    """The runs routes over ``scope``'s store; ``clock`` dates runs created without a start;
    ``finished`` is told of each run that ends."""
    runs = _Runs(scope, clock, finished)
    router = APIRouter(prefix="/api/v1/runs")
    router.add_api_route("", runs.upsert, methods=["POST"])
    router.add_api_route("", runs.list_runs, methods=["GET"])
    router.add_api_route("/{run_id}", runs.get_run, methods=["GET"])
    router.add_api_route("/{run_id}/finish", runs.finish, methods=["POST"])
    return router
