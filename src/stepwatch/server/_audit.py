"""Audit API: every notification, command, approval and playbook run, newest first, and the
head of the hash chain that makes an edit of them evident."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from ..act import AuditRecord
from ..model import Event
from ..store import AuditQuery
from ._auth import Reader
from ._errors import ApiError
from ._jsonio import JSON, clean
from ._paging import page, paged
from ._params import seconds
from ._scope import Scope

__all__ = ["audit_json", "audit_router"]


def audit_json(event: Event, record: AuditRecord) -> dict[str, object]:
    """One record as the API shows it: when, then the record's own fields."""
    return clean(
        {
            "ts": event.ts,
            "action": record.action,
            "actor": record.actor,
            "what": record.what,
            "result": record.result,
            "labels": dict(record.labels),
            "alert_id": record.alert_id,
            "kind": record.kind,
            "detail": dict(record.detail),
        }
    )


def audit_router(scope: Scope) -> APIRouter:
    """``GET /api/v1/audit`` over the store's audit events of the caller's projects (records
    of no run, such as token changes, are for identities of every project)."""
    router = APIRouter(prefix="/api/v1")
    store = scope.store

    @router.get("/audit")
    def audit(
        who: Reader,
        request: Request,
        run: str | None = None,
        action: str | None = None,
        kind: str | None = None,
        since: float | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
    ) -> JSON:
        """Audit records newest first; ``action`` (notify, command, approval, playbook, policy)
        and ``kind`` (the alert kind) filter, ``since`` is a time in seconds. A page of
        ``limit``: the next page's cursor is in the ``X-Next-Cursor`` header."""
        query = AuditQuery(run, action, kind, seconds("since", since), who.projects)
        got = page(lambda at: store.current.audit(query, at, limit), cursor)
        out = []
        for event in got.items:
            try:
                out.append(audit_json(event, AuditRecord.from_event(event)))
            except ValueError:
                continue  # a record in a shape this version does not read
        return paged(out, got.cursor, request)

    @router.get("/audit/head")
    def head(who: Reader) -> JSON:
        """The head of the hash chain over the collector's records (audit included): write
        it down elsewhere, and ``stepwatch audit verify`` shows later whether the store still
        leads to it. The chain spans every project, so only tokens of every project read it."""
        if who.projects is not None:
            raise ApiError(403, f"{who.name}: the head of the chain is for tokens of every project")
        found = store.record_head()
        return JSON({"seq": found.seq, "hash": found.hash})

    return router
