"""Open alerts from what a collector offers: its alerts API, or else its alert events.

Both carry the same fields (the API's alerts are the events' ``data``): rule,
kind, state, severity, since, annotations. An alert is open while its newest
transition is not in a closed state.
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


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _is_open(fields: Mapping[str, Any]) -> bool:
    return (_text(fields.get("state")) or "firing").lower() not in CLOSED_STATES


def _row(fields: Mapping[str, Any], labels: Any, text: str, ts: Any) -> AlertRow:
    """An alert's fields as a row; the run label is left out (the screen is about one run)."""
    since = _number(fields.get("since"))
    return AlertRow(
        name=_text(fields.get("rule")) or _text(fields.get("kind")) or "alert",
        severity=_text(fields.get("severity")),
        summary=_text(_mapping(fields.get("annotations")).get("summary")) or text,
        since=_number(ts) if since is None else since,
        labels={str(k): str(v) for k, v in _mapping(labels).items() if k != "run"},
    )


def alerts_from_api(body: Any) -> tuple[AlertRow, ...]:
    """Rows from ``GET /api/v1/alerts``: a list of alerts, each in its latest state."""
    items = [a for a in body if isinstance(a, Mapping)] if isinstance(body, list) else []
    return tuple(_row(a, a.get("labels"), "", a.get("ts")) for a in items if _is_open(a))


def open_alerts_from_events(events: Iterable[Mapping[str, Any]]) -> tuple[AlertRow, ...]:
    """The alerts whose newest event (by time) leaves them open, oldest first."""
    newest: dict[tuple[str, tuple[tuple[str, str], ...]], Mapping[str, Any]] = {}
    for event in sorted(events, key=lambda e: _number(e.get("ts")) or 0.0):
        data = _mapping(event.get("data"))
        who = _text(data.get("id")) or _text(data.get("rule")) or _text(event.get("text"))
        labels = sorted((str(k), str(v)) for k, v in _mapping(event.get("labels")).items())
        newest[(who, tuple(labels))] = event
    rows = [
        _row(data, e.get("labels"), _text(e.get("text")), e.get("ts"))
        for e in newest.values()
        if _is_open(data := _mapping(e.get("data")))
    ]
    return tuple(sorted(rows, key=lambda r: r.since or 0.0))
