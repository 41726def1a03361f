"""POST /api/v1/logs/search (a bool query over the logs of a run or of the fleet, with context)
and POST /api/v1/logs/search/rule (the same search as a log rule's YAML: a saved search)."""

from __future__ import annotations

import time
from typing import Any, Literal

import yaml
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from .._log_query import LogQuery, QueryError, parse_query, plain_filters, with_filters
from ..detect.rules import SEVERITIES
from ..model import Event
from ..store import LogHit
from ._auth import Reader
from ._errors import ApiError
from ._jsonio import JSON, clean
from ._params import time_range
from ._scope import Scope

__all__ = ["log_search_router"]

#: Context lines each side of a hit, at most: context is for reading, not for export.
MAX_CONTEXT = 50


class SearchIn(BaseModel):
    """A search: ``query`` in Elasticsearch's bool form (a ``{"query": ...}`` document as sent
    to Elasticsearch is this body as it is), narrowed by the plain fields, all ANDed."""

    model_config = ConfigDict(extra="forbid")

    query: dict[str, Any] | None = None
    q: str | None = Field(default=None, description="text the line holds, any case")
    regex: str | None = Field(default=None, description="RE2 pattern the line matches")
    run: str | None = None
    node: str | None = None
    rank: str | None = None
    level: str | None = None
    start: float | None = Field(default=None, description="seconds since the epoch")
    end: float | None = None
    context: int = Field(default=0, ge=0, le=MAX_CONTEXT)
    limit: int = Field(default=100, ge=1, le=10_000)
    order: Literal["desc", "asc"] = "desc"


class RuleIn(SearchIn):
    """A saved search made a log rule: its alert name, severity and entity labels."""

    alert: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    severity: str = "warning"
    by: list[str] = Field(default_factory=lambda: ["run", "node"], max_length=8)
    group: str = "saved_searches"


def _filters(s: SearchIn, *, with_time: bool) -> list[dict[str, Any]]:
    """The plain fields as bool ``filter`` clauses."""
    start, end = (s.start, s.end) if with_time else (None, None)
    return plain_filters(q=s.q, regex=s.regex, run=s.run, node=s.node, rank=s.rank,
                         level=s.level, start=start, end=end)  # fmt: skip


def _query(s: SearchIn, *, with_time: bool = True) -> LogQuery:
    try:
        base = None if s.query is None else parse_query(s.query)
        filters = _filters(s, with_time=with_time)
        return base if base is not None and not filters else with_filters(base, filters)
    except QueryError as exc:
        raise ApiError(400, f"query: {exc}", reason="query") from None


def _line(e: Event) -> dict[str, Any]:
    return clean({"ts": e.ts, "text": e.text, "labels": e.labels, "data": e.data})


def _hit(h: LogHit) -> dict[str, Any]:
    return {
        **_line(h.event),
        "eid": h.eid,
        "before": [_line(e) for e in h.before],
        "after": [_line(e) for e in h.after],
    }


def log_search_router(scope: Scope) -> APIRouter:
    """The log search routes over the scope's store."""
    router = APIRouter(prefix="/api/v1/logs")

    @router.post("/search")
    async def search(who: Reader, body: SearchIn) -> JSON:
        """Log lines matching the query, newest first (``order: asc``: oldest first), each
        with ``context`` lines before and after it of the same run, node and rank (from the
        5 minutes around it); only lines of the caller's projects."""
        time_range(body.start, body.end)
        query = _query(body)
        began = time.perf_counter()
        hits = await run_in_threadpool(
            scope.store.search_logs,
            query,
            runs=scope.runs_of(who),
            limit=body.limit,
            context=body.context,
            newest_first=body.order == "desc",
        )
        took = round((time.perf_counter() - began) * 1000, 1)
        return JSON({"took_ms": took, "hits": [_hit(h) for h in hits]})

    @router.post("/search/rule")
    async def as_rule(who: Reader, body: RuleIn) -> JSON:
        """The search as a rule file (YAML) holding one log rule that fires on each new line
        the search would find (its start and end do not carry over: a rule watches new lines).
        Add the file with --rules."""
        if body.severity not in SEVERITIES:
            raise ApiError(400, f"severity must be one of {', '.join(SEVERITIES)}")
        query = _query(body, with_time=False)
        rule = {
            "alert": body.alert,
            "kind": body.alert.lower(),
            "signal": {"log": {"query": yaml.safe_load(query.source)}, "by": body.by},
            "severity": body.severity,
        }
        document = {"groups": [{"name": body.group, "rules": [rule]}]}
        return JSON({"yaml": yaml.safe_dump(document, sort_keys=False, width=100)})

    return router
