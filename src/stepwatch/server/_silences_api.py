"""Silences API: create one (matchers and a duration or an end), list them, expire one early."""

from __future__ import annotations

import math

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ..auth import Identity
from ..detect import Matcher, Silence, SilenceBook, SilenceEntry
from ..store import Store
from ._auth import Operator, Reader
from ._errors import ApiError
from ._jsonio import JSON

__all__ = ["silences_router"]


class SilenceIn(BaseModel):
    """A silence as people ask for it: ``node=node3``, ``kind=~gpu_.*``; for a while or until."""

    model_config = ConfigDict(extra="forbid")

    matchers: list[str] = Field(min_length=1, max_length=64)
    duration_s: float | None = Field(default=None, gt=0)
    ends_at: float | None = None
    starts_at: float | None = None
    comment: str = Field(default="", max_length=4096)


def _projects_of(silence: Silence) -> set[str]:
    """The projects a silence is limited to (its ``project=P`` matchers)."""
    return {m.value for m in silence.matchers if m.label == "project" and m.op == "="}


def _scoped(who: Identity, matchers: tuple[Matcher, ...]) -> tuple[Matcher, ...]:
    """The matchers of a silence the caller may make: one of a project's operators mutes
    only its projects' alerts, so its silences carry a ``project=P`` matcher of its own."""
    if who.projects is None:
        return matchers
    named = [m for m in matchers if m.label == "project"]
    if any(m.op != "=" or m.value not in who.projects for m in named):
        mine = ", ".join(sorted(who.projects))
        raise ApiError(403, f"{who.name} may only silence alerts of its projects ({mine})")
    if named:
        return matchers
    if len(who.projects) != 1:
        mine = ", ".join(sorted(who.projects))
        raise ApiError(400, f"name the project the silence is for: add project=P (one of {mine})")
    (project,) = who.projects
    return (*matchers, Matcher("project", project))


def _silence(body: SilenceIn, now: float, who: Identity) -> Silence:
    """Check everything before anything is recorded; every mistake is a 400 that says what."""
    if (body.duration_s is None) == (body.ends_at is None):
        raise ApiError(400, "give exactly one of duration_s or ends_at")
    for name, t in (("ends_at", body.ends_at), ("starts_at", body.starts_at)):
        if t is not None and not math.isfinite(t):
            raise ApiError(400, f"{name} must be a finite number of seconds")
    starts = now if body.starts_at is None else body.starts_at
    ends = starts + body.duration_s if body.duration_s is not None else float(body.ends_at or 0)
    if ends <= now:
        raise ApiError(400, f"the silence would end at {ends}, which is not in the future")
    try:
        matchers = _scoped(who, tuple(Matcher.parse(text) for text in body.matchers))
        return Silence(matchers, starts, ends, who.actor, body.comment)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None


class _Silences:
    """The silences routes over the collector's silence book and the store's silence table
    (which also holds the silences that ended before the collector started)."""

    def __init__(self, book: SilenceBook, store: Store) -> None:
        self.book, self.store = book, store

    def create(self, who: Operator, body: SilenceIn) -> JSON:
        """Record a silence; it mutes matching alerts from ``starts_at`` (default now)."""
        entry = self.book.add(_silence(body, self.book.clock(), who))
        return JSON(entry.as_json(self.book.clock()), status_code=201)

    def _mine(self, who: Identity, entries: list[SilenceEntry]) -> list[SilenceEntry]:
        if who.projects is None:
            return entries
        return [e for e in entries if _projects_of(e.silence) & who.projects]

    def list_silences(self, who: Reader, all: bool = False) -> JSON:
        """Silences not yet ended (with ``all=1``: every one, expired ones too) of the caller's
        projects (an identity of every project: all of them)."""
        now = self.book.clock()
        return JSON([e.as_json(now) for e in self._mine(who, self._entries(all))])

    def _entries(self, include_ended: bool) -> list[SilenceEntry]:
        if not include_ended:
            return self.book.entries()
        rows = self.store.current.silences(self.book.clock(), include_ended=True)
        return [SilenceEntry.from_row(row) for row in rows]

    def expire(self, who: Operator, silence_id: str) -> JSON:
        """End a silence now (one that has ended stays as it is); 404 for an unknown id (or
        one of another project)."""
        known = {e.silence.id: e for e in self._mine(who, self._entries(True))}
        if silence_id not in known:
            raise ApiError(404, f"unknown silence {silence_id!r}")
        try:
            entry = self.book.expire(silence_id, by=who.actor)
        except KeyError:  # ended before this collector started: nothing to end
            entry = known[silence_id]
        return JSON(entry.as_json(self.book.clock()))


def silences_router(book: SilenceBook, store: Store) -> APIRouter:
    """The silences routes over ``book`` and ``store``'s silence table."""
    silences = _Silences(book, store)
    router = APIRouter(prefix="/api/v1/silences")
    router.add_api_route("", silences.create, methods=["POST"], status_code=201)
    router.add_api_route("", silences.list_silences, methods=["GET"])
    router.add_api_route("/{silence_id}", silences.expire, methods=["DELETE"])
    return router
