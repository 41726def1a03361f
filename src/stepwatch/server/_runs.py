"""Runs API: create or update a run, list and read runs, mark one finished."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ..auth import Permission
from ..model import MAX_ABS_TS_S, MAX_INT64, Run, RunStatus
from ..store import Store
from ._auth import need
from ._errors import ApiError
from ._jsonio import JSON, clean

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


class _Runs:
    """The runs routes over a store; ``clock`` dates runs created without a start, and
    ``finished`` hears of each run that ends (its alerts resolve)."""

    def __init__(
        self, store: Store, clock: Callable[[], float], finished: Callable[[Run], None]
    ) -> None:
        self.store = store
        self.clock = clock
        self.finished = finished

    def upsert(self, run: RunIn) -> JSON:
        """Create a run (an id is generated when missing) or update the fields given."""
        run_id = run.id or uuid.uuid4().hex
        merged = merge_run(self.store.get_run(run_id), run, run_id, self.clock())
        self.store.upsert_run(merged)
        return JSON(_run_json(merged))

    def list_runs(self, project: str | None = None, status: str | None = None) -> JSON:
        """Runs, optionally of one project and/or in one status."""
        return JSON([_run_json(r) for r in self.store.list_runs(project=project, status=status)])

    def get_run(self, run_id: str) -> JSON:
        """One run, or 404."""
        run = self.store.get_run(run_id)
        if run is None:
            raise ApiError(404, f"unknown run {run_id!r}")
        return JSON(_run_json(run))

    def finish(self, run_id: str, body: FinishIn) -> JSON:
        """Mark a run finished, failed or killed; its open alerts are resolved."""
        try:
            run = self.store.finish_run(run_id, body.status, end=body.end)
        except KeyError:
            raise ApiError(404, f"unknown run {run_id!r}") from None
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        self.finished(run)
        return JSON(_run_json(run))


def runs_router(
    store: Store, clock: Callable[[], float], finished: Callable[[Run], None] = lambda run: None
) -> APIRouter:
    """The runs routes over ``store``; ``clock`` dates runs created without a start;
    ``finished`` is told of each run that ends."""
    runs = _Runs(store, clock, finished)
    router = APIRouter(prefix="/api/v1/runs")
    write, read = [need(Permission.WRITE)], [need(Permission.READ)]
    router.add_api_route("", runs.upsert, methods=["POST"], dependencies=write)
    router.add_api_route("", runs.list_runs, methods=["GET"], dependencies=read)
    router.add_api_route("/{run_id}", runs.get_run, methods=["GET"], dependencies=read)
    ends = [need(Permission.WRITE, Permission.OPERATE)]  # its SDK, or a person who knows better
    router.add_api_route("/{run_id}/finish", runs.finish, methods=["POST"], dependencies=ends)
    return router
