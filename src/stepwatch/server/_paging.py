"""List routes page by cursor: the body stays a JSON list (older clients read it as before),
the next page's cursor rides in headers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request

from ..store import Page
from ._errors import ApiError
from ._jsonio import JSON

__all__ = ["NEXT_CURSOR", "page", "paged"]

T = TypeVar("T")

#: The header that carries the cursor of the next page (absent on the last page).
NEXT_CURSOR = "X-Next-Cursor"


def page(read: Callable[[str | None], Page[T]], cursor: str | None) -> Page[T]:
    """``read(cursor)``; a cursor the store did not give out is the caller's 400."""
    try:
        return read(cursor)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None


def paged(items: list[Any], cursor: str | None, request: Request) -> JSON:
    """The JSON list of a page and, when more follow, ``X-Next-Cursor`` and a ``Link`` to
    the next page (the same query with its cursor)."""
    if cursor is None:
        return JSON(items)
    url = request.url.include_query_params(cursor=cursor)
    link = f'<{url.path}?{url.query}>; rel="next"'
    return JSON(items, headers={NEXT_CURSOR: cursor, "Link": link})
