"""Open alerts from what a collector offers: its alerts API, or else its alert events.

Alert events record an alert's lifecycle (``data.state``: pending, firing,
resolved...); an alert is open while its newest event is not in a closed state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._snapshot import AlertRow

__all__ = ["CLOSED_STATES", "alerts_from_api", "open_alerts_from_events"]

#: Lifecycle states of an alert that is over.
CLOSED_STATES = frozenset({"resolved", "inactive"})


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _labels(value: Any) -> dict[str, str]:
    """An alert's labels, less the run (the whole screen is about one run)."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items() if k != "run"}


def _name(fields: Mapping[str, Any]) -> str:
    for key in ("alert", "rule", "name", "kind"):
        value = fields.get(key)
        if isinstance(value, Mapping):
            value = value.get("alert") or value.get("name")
        if isinstance(value, str) and value:
            return value
    return "alert"


def _row(fields: Mapping[str, Any], labels: Any, text: str = "", ts: Any = None) -> AlertRow:
    annotations = fields.get("annotations")
    summary = _text(fields.get("summary")) or (
        _text(annotations.get("summary")) if isinstance(annotations, Mapping) else ""
    )
    since = _number(fields.get("since"))
    return AlertRow(
        name=_name(fields),
        severity=_text(fields.get("severity")),
        summary=summary or _text(fields.get("text")) or text,
        since=_number(ts) if since is None else since,
        labels=_labels(labels),
    )


def alerts_from_api(body: Any) -> tuple[AlertRow, ...]:
    """Rows from the alerts API's answer: a list of alerts, or an object holding one."""
    items = body.get("alerts", []) if isinstance(body, Mapping) else body
    if not isinstance(items, list):
        return ()
    rows = [
        _row(a, a.get("labels"), ts=a.get("ts") or a.get("started"))
        for a in items
        if isinstance(a, Mapping) and _text(a.get("state")).lower() not in CLOSED_STATES
    ]
    return tuple(rows)


def open_alerts_from_events(events: Iterable[Mapping[str, Any]]) -> tuple[AlertRow, ...]:
    """The alerts whose newest event (by time) leaves them open, oldest first."""
    newest: dict[tuple[str, tuple[tuple[str, str], ...]], Mapping[str, Any]] = {}
    for event in sorted(events, key=lambda e: _number(e.get("ts")) or 0.0):
        data = event.get("data")
        data = data if isinstance(data, Mapping) else {}
        who = _text(data.get("id")) or _text(data.get("rule")) or _text(event.get("text"))
        newest[(who, tuple(sorted(_labels(event.get("labels")).items())))] = event
    rows = []
    for event in newest.values():
        data = event.get("data")
        data = data if isinstance(data, Mapping) else {}
        if (_text(data.get("state")) or "firing").lower() in CLOSED_STATES:
            continue
        rows.append(_row(data, event.get("labels"), _text(event.get("text")), event.get("ts")))
    return tuple(sorted(rows, key=lambda r: r.since or 0.0))
