"""Elasticsearch's ``_bulk`` API, so the log shippers people run (Filebeat, Logstash, Fluent Bit,
Vector, rsyslog's omelasticsearch) send log lines to stepwatch unchanged.

Each request becomes one batch of log events handed to the group writer, as ingest does: a
source per identity (``bulk/<name>``), numbered by time so the store applies each once.
Shippers authenticate as they can with Elasticsearch: basic auth with the token as password,
``ApiKey <token>`` (or base64 of ``id:token``), or a bearer token.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import gzip
import json
import re
import time
import zlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from .. import __version__
from ..auth import Identity, Permission, TokenRefused
from ..model import MAX_ABS_TS_S, Event, SampleBatch, validate_label
from ._auth import Guard, Need
from ._body import check_owner, read_body
from ._errors import ApiError, error_responses
from ._jsonio import JSON
from ._scope import Scope
from ._writer import GroupWriter, WriterClosed

__all__ = ["BULK_PATHS", "bulk_router"]

#: The paths whose body the route reads within its own limit (a bulk body is many lines).
BULK_PATHS = re.compile(r"/([^/]+/)?_bulk")

#: The Elasticsearch version announced: 8.x clients (Filebeat, Vector) accept it.
ES_VERSION = "8.11.0"
#: What Elasticsearch 8 clients check each answer carries.
_PRODUCT = {"X-Elastic-Product": "Elasticsearch"}
#: Level names shippers send, as the levels the tailer detects.
_LEVELS = {
    "trace": "debug", "debug": "debug", "info": "info", "information": "info",
    "informational": "info", "notice": "info", "warn": "warning", "warning": "warning",
    "err": "error", "error": "error", "crit": "critical", "critical": "critical",
    "fatal": "critical", "alert": "critical", "emerg": "critical", "panic": "critical",
}  # fmt: skip
#: Fields a document may hold labels in, besides ``labels`` (ECS's own object of labels).
_LABEL_FIELDS = ("run", "rank", "node", "gpu")


class _Shipper(Need):
    """``Need(WRITE)`` that also takes the credentials Elasticsearch clients send."""

    def __call__(self, request: Request) -> Identity:
        guard: Guard = request.app.state.guard
        secret = _shipper_secret(request.headers.get("authorization", ""))
        if guard.tokens is None or secret is None:
            return super().__call__(request)
        try:
            who = guard.tokens.verify(secret)
        except TokenRefused as exc:
            raise ApiError(401, str(exc), {"WWW-Authenticate": 'Basic realm="stepwatch"'}) from None
        if not who.can_any(self.permissions):
            raise ApiError(403, f"{who.name} has role {who.role}: this needs write permission")
        return who


Shipper = Annotated[Identity, Depends(_Shipper(Permission.WRITE))]


def _shipper_secret(header: str) -> str | None:
    """The token in a ``Basic`` (the password) or ``ApiKey`` header; None for other schemes."""
    scheme, _, given = header.partition(" ")
    given = given.strip()
    if scheme.lower() not in ("basic", "apikey") or not given:
        return None
    if scheme.lower() == "apikey" and given.startswith("swt_"):
        return given
    try:
        decoded = base64.b64decode(given, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ApiError(401, f"malformed {scheme} credentials") from None
    return decoded.partition(":")[2] or decoded


def _get(doc: Mapping[str, Any], dotted: str) -> Any:
    """A field by its dotted name, written flat (``"host.name"``) or nested."""
    if dotted in doc:
        return doc[dotted]
    head, _, rest = dotted.partition(".")
    inner = doc.get(head)
    return _get(inner, rest) if rest and isinstance(inner, Mapping) else None


def _ts(doc: Mapping[str, Any], now: float) -> float:
    given = _get(doc, "@timestamp") or doc.get("timestamp")
    if given is None:
        return now
    if isinstance(given, (int, float)) and not isinstance(given, bool):
        ts = given / 1000  # epoch_millis, as Elasticsearch reads a number
    elif isinstance(given, str):
        try:
            parsed = datetime.fromisoformat(given)
        except ValueError:
            raise ValueError(f"@timestamp {given!r} is not an ISO 8601 date") from None
        ts = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    else:
        raise ValueError(f"@timestamp {given!r} is not a date")
    if abs(ts) > MAX_ABS_TS_S:
        raise ValueError(f"@timestamp {given!r} is out of range")
    return ts


def _labels(doc: Mapping[str, Any]) -> dict[str, str]:
    given = doc.get("labels")
    labels = dict(given) if isinstance(given, Mapping) else {}
    for name in _LABEL_FIELDS:
        if name in doc and not isinstance(doc[name], (Mapping, list)):
            labels[name] = doc[name]
    host = _get(doc, "host.name") or doc.get("hostname")
    if host is None and isinstance(doc.get("host"), str):
        host = doc["host"]
    if host is not None and "node" not in labels:
        labels["node"] = host
    out = {}
    for name, value in labels.items():
        text = str(int(value)) if isinstance(value, float) and value.is_integer() else value
        if isinstance(text, bool) or not isinstance(text, (str, int)):
            raise ValueError(f"label {name!r} must be a string or a number")
        out[str(name)] = validate_label(str(name), str(text))
    return out


def to_event(doc: object, index: str, now: float) -> Event:
    """One ``_bulk`` document as a log event; ValueError says what is wrong with it."""
    if not isinstance(doc, Mapping):
        raise ValueError("a document must be a JSON object")
    text = doc.get("message", _get(doc, "event.original"))
    if not isinstance(text, str):
        raise ValueError("a document needs a message (a string)")
    data: dict[str, Any] = {"index": index}
    level = _get(doc, "log.level") or doc.get("level") or doc.get("severity")
    if isinstance(level, str) and level.strip():
        data["level"] = _LEVELS.get(level.strip().lower(), level.strip().lower())
    return Event(_ts(doc, now), "log", text, _labels(doc), data)


def _lines(body: bytes, encoding: str) -> list[bytes]:
    if encoding == "gzip":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error):
            raise ApiError(400, "body is not valid gzip", reason="malformed") from None
    elif encoding not in ("", "identity"):
        raise ApiError(415, f"unsupported Content-Encoding {encoding!r}", reason="content_type")
    return [line for line in body.split(b"\n") if line.strip()]


def _item(action: str, index: str, doc_id: str, status: int, error: str | None = None) -> Any:
    if error is not None:
        kind = "security_exception" if status == 403 else "document_parsing_exception"
        return {action: {"_index": index, "_id": doc_id, "status": status,
                         "error": {"type": kind, "reason": error}}}  # fmt: skip
    return {
        action: {
            "_index": index, "_id": doc_id, "_version": 1, "result": "created",
            "_shards": {"total": 1, "successful": 1, "failed": 0}, "status": status,
        }
    }  # fmt: skip


def _parse(
    lines: list[bytes], default_index: str, now: float, seq: int
) -> tuple[list[Event], list[tuple[int, Any]]]:
    """The events of a bulk body and, for each action in order, its answer (an event's
    position, or the error item)."""
    events: list[Event] = []
    answers: list[tuple[int, Any]] = []
    pos = 0
    while pos < len(lines):
        try:
            action_line = json.loads(lines[pos])
        except ValueError:
            raise ApiError(400, f"line {pos + 1}: not JSON", reason="malformed") from None
        if not isinstance(action_line, dict) or len(action_line) != 1:
            raise ApiError(400, f"line {pos + 1}: expected an action", reason="malformed")
        ((action, meta),) = action_line.items()
        meta = meta if isinstance(meta, dict) else {}
        index = str(meta.get("_index", default_index))
        doc_id = str(meta.get("_id", f"{seq}-{len(answers)}"))
        if action == "delete":
            answers.append(
                (-1, _item(action, index, doc_id, 400, "stepwatch keeps logs: no delete"))
            )
            pos += 1
            continue
        if pos + 1 >= len(lines):
            raise ApiError(400, f"line {pos + 1}: action without a document", reason="malformed")
        pos += 2
        if action not in ("index", "create"):
            answers.append(
                (-1, _item(action, index, doc_id, 400, f"unsupported action {action!r}"))
            )
            continue
        try:
            events.append(to_event(json.loads(lines[pos - 1]), index, now))
            answers.append((len(events) - 1, _item(action, index, doc_id, 201)))
        except ValueError as exc:
            answers.append((-1, _item(action, index, doc_id, 400, str(exc))))
    return events, answers


def _check_projects(scope: Scope, who: Identity, events: list[Event]) -> None:
    """As ingest: a token of some projects writes only lines of their runs; a line of another
    project refuses the whole request, before anything is stored."""
    if who.projects is None:
        return
    mine = ", ".join(sorted(who.projects))
    for event in events:
        run = event.labels.get("run")
        if run is None:
            message = f"{who.name} writes only lines with a run of its projects ({mine})"
            raise ApiError(403, message, reason="project")
        if not who.sees(scope.project_of(run)):
            raise ApiError(403, f"{who.name} may not write run {run!r}", reason="project")


def bulk_router(
    writer: GroupWriter, max_body_bytes: int, clock: Callable[[], float], scope: Scope
) -> APIRouter:
    """The ``_bulk`` routes and the version document Elasticsearch clients read first."""
    router = APIRouter(tags=["elasticsearch"])
    last_seq = [0]

    def next_seq() -> int:
        """Nanoseconds of the clock, always rising: later than any seq applied before a
        restart, so none is taken for a duplicate."""
        last_seq[0] = max(time.time_ns(), last_seq[0] + 1)
        return last_seq[0]

    @router.get("/es")
    def version(who: Shipper) -> JSON:
        """What Elasticsearch answers at ``/``, for clients that check the server (give them
        ``/es`` as the path; their ``_bulk`` then goes to ``/es/_bulk``, index ``es``)."""
        doc = {
            "name": "stepwatch",
            "cluster_name": "stepwatch",
            "cluster_uuid": "stepwatch",
            "version": {
                "number": ES_VERSION,
                "build_flavor": "default",
                "build_type": "stepwatch",
                "lucene_version": "9.8.0",
                "minimum_wire_compatibility_version": "7.17.0",
                "minimum_index_compatibility_version": "7.0.0",
                "stepwatch": __version__,
            },
            "tagline": "You Know, for Search",
        }
        return JSON(doc, headers=_PRODUCT)

    async def bulk(who: Identity, request: Request, index: str) -> JSON:
        began = time.perf_counter()
        body = await read_body(request, max_body_bytes)
        lines = _lines(body, request.headers.get("content-encoding", "").strip().lower())
        seq = next_seq()
        events, answers = await run_in_threadpool(_parse, lines, index, clock(), seq)
        _check_projects(scope, who, events)
        if events:
            source = f"bulk/{who.name}"
            await check_owner(scope.store, source, who.name)
            empty = np.empty(0)
            batch = SampleBatch(
                source, seq, [], empty.astype(np.uint32), empty, empty.astype(np.int64), empty,
                events,
            )  # fmt: skip
            try:
                await asyncio.wrap_future(writer.submit(batch))
            except WriterClosed as exc:  # the shipper retries, as after any 5xx
                headers = {"Retry-After": str(exc.retry_after_s)}
                raise ApiError(503, str(exc), headers, reason="queue_full") from None
            except ValueError as exc:
                raise ApiError(400, f"batch rejected: {exc}", reason="store_checks") from None
        took = int((time.perf_counter() - began) * 1000)
        errors = any(at < 0 for at, _ in answers)
        items = [item for _, item in answers]
        return JSON({"took": took, "errors": errors, "items": items}, headers=_PRODUCT)

    responses = error_responses(413, 503)

    @router.post("/_bulk", responses=responses)
    async def bulk_any(who: Shipper, request: Request) -> JSON:
        """Log lines as NDJSON action/document pairs (``index`` or ``create``); each document's
        ``message``, ``@timestamp``, ``host.name`` (the node), ``log.level`` and labels (``run``,
        ``rank``, or under ``labels``) become a log line. Answers as Elasticsearch does."""
        return await bulk(who, request, "logs")

    @router.post("/{index}/_bulk", responses=responses)
    async def bulk_index(who: Shipper, request: Request, index: str) -> JSON:
        """``/_bulk`` with a default index (kept with each line as ``data.index``)."""
        return await bulk(who, request, index)

    return router
