"""The act layer's checkpoints: JSON with a format version, alerts in their API form, and the
collector's audit trail since the checkpoint, which says what was done after it was taken."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..detect import ALERT_EVENT, LiveAlert
from ..model import Event
from ._audit import AUDIT_EVENT, AuditRecord

__all__ = ["History", "alert_of", "audits", "decode", "encode", "malformed"]

#: The collector's own records since a wall time, oldest first (audit records among them).
History = Callable[[float], Sequence[Event]]


def encode(version: int, body: dict[str, Any]) -> bytes:
    """A checkpoint: ``body`` with its format version."""
    return json.dumps({"format": version, **body}, separators=(",", ":")).encode()


def decode(state: bytes, version: int, part: str) -> dict[str, Any]:
    """The body of a checkpoint of this format; ValueError for anything else."""
    try:
        data = json.loads(state)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"the {part} checkpoint is not JSON") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != version:
        raise ValueError(f"the {part} checkpoint has format {found!r}, not {version}")
    return dict(data)


@contextmanager
def malformed(part: str) -> Iterator[None]:
    """A checkpoint with a field missing or of the wrong type is one ValueError."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ValueError(f"the {part} checkpoint is malformed: {exc!r}") from None


def alert_of(data: dict[str, Any]) -> LiveAlert:
    """An alert back from ``LiveAlert.as_json``."""
    return LiveAlert.from_event(Event(float(data["ts"]), ALERT_EVENT, "", data["labels"], data))


def audits(history: History | None, since: float, action: str) -> list[tuple[float, AuditRecord]]:
    """The audit records of ``action`` stored since ``since``, with their times, oldest first."""
    found: list[tuple[float, AuditRecord]] = []
    for event in [] if history is None else history(since):
        if event.kind != AUDIT_EVENT or event.ts < since:
            continue
        try:
            record = AuditRecord.from_event(event)
        except (TypeError, ValueError):
            continue  # not in the shape this version writes
        if record.action == action:
            found.append((event.ts, record))
    return sorted(found, key=lambda pair: pair[0])
