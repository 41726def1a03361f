"""Token administration over the API: list, create (the secret shown once), revoke."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ..auth import ALL_PROJECTS, Identity, TokenBook, TokenError
from ..detect import parse_duration
from ._auth import Admin
from ._errors import ApiError
from ._jsonio import JSON

__all__ = ["tokens_router"]


class TokenIn(BaseModel):
    """A token to make: its role, projects (``["*"]``: all), name and lifetime (``30d``)."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(max_length=16)
    projects: list[str] = Field(min_length=1, max_length=256)
    name: str | None = Field(default=None, max_length=64)
    expires: str | None = Field(default=None, max_length=16)


def _within(who: Identity, projects: Sequence[str]) -> bool:
    """Whether tokens of ``projects`` are the caller's to see, make and revoke: an admin of
    some projects never makes (or sees) a token reaching beyond them."""
    if who.projects is None:
        return True
    return ALL_PROJECTS not in projects and set(projects) <= who.projects


def tokens_router(book: TokenBook) -> APIRouter:
    """Admin-only routes over the collector's tokens, limited to the admin's projects."""
    router = APIRouter(prefix="/api/v1/tokens")

    @router.get("")
    def list_tokens(who: Admin) -> JSON:
        """Every token of the caller's projects without its secret (only hashes are kept)."""
        return JSON([t.as_json() for t in book.tokens() if _within(who, t.projects)])

    @router.post("", status_code=201)
    def create(body: TokenIn, who: Admin) -> JSON:
        """Make a token; the answer's ``token`` is the only time the secret is shown."""
        if not _within(who, body.projects):
            mine = ", ".join(sorted(who.projects or ()))
            raise ApiError(403, f"{who.name} makes tokens of its projects only ({mine})")
        try:
            expires = None if body.expires is None else parse_duration(body.expires)
            record, secret = book.create(
                body.role, body.projects, name=body.name, expires_in_s=expires, by=who.actor
            )
        except (TokenError, ValueError) as exc:
            raise ApiError(400, str(exc)) from None
        return JSON({**record.as_json(), "token": secret}, status_code=201)

    @router.delete("/{token_id}")
    def revoke(token_id: str, who: Admin) -> JSON:
        """Revoke a token by id or name: it opens nothing from now on."""
        known = [t for t in book.tokens() if token_id in (t.id, t.name)]
        if not any(_within(who, t.projects) for t in known):
            raise ApiError(404, f"unknown token {token_id!r}")
        try:
            return JSON(book.revoke(token_id, by=who.actor).as_json())
        except TokenError as exc:
            raise ApiError(404, str(exc)) from None

    return router
