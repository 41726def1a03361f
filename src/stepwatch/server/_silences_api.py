"""Silences API: create one (matchers and a duration or an end), list them, expire one early."""

from __future__ import annotations

import math

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ..auth import Permission
from ..detect import Matcher, Silence, SilenceBook
from ._auth import need
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
    created_by: str = Field(default="", max_length=256)


def _silence(body: SilenceIn, now: float) -> Silence:
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
        matchers = tuple(Matcher.parse(text) for text in body.matchers)
        return Silence(matchers, starts, ends, body.created_by, body.comment)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None


class _Silences:
    """The silences routes over the collector's silence book."""

    def __init__(self, book: SilenceBook) -> None:
        self.book = book

    def create(self, body: SilenceIn) -> JSON:
        """Record a silence; it mutes matching alerts from ``starts_at`` (default now)."""
        entry = self.book.add(_silence(body, self.book.clock()))
        return JSON(entry.as_json(self.book.clock()), status_code=201)

    def list_silences(self, all: bool = False) -> JSON:
        """Silences not yet ended (with ``all=1``: every one, expired ones too)."""
        now = self.book.clock()
        return JSON([e.as_json(now) for e in self.book.entries(include_ended=all)])

    def expire(self, silence_id: str) -> JSON:
        """End a silence now; 404 for an unknown id."""
        try:
            entry = self.book.expire(silence_id)
        except KeyError:
            raise ApiError(404, f"unknown silence {silence_id!r}") from None
        return JSON(entry.as_json(self.book.clock()))


def silences_router(book: SilenceBook) -> APIRouter:
    """The silences routes over ``book``."""
    silences = _Silences(book)
    router = APIRouter(prefix="/api/v1/silences")
    read, operate = [need(Permission.READ)], [need(Permission.OPERATE)]
    router.add_api_route(
        "", silences.create, methods=["POST"], status_code=201, dependencies=operate
    )
    router.add_api_route("", silences.list_silences, methods=["GET"], dependencies=read)
    router.add_api_route("/{silence_id}", silences.expire, methods=["DELETE"], dependencies=operate)
    return router
