"""Open alerts as the collector's alerts API lists them (each in its latest state, as the
store's alert table holds it): ``top`` computes no alert state of its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._snapshot import AlertRow

__all__ = ["alerts_from_api"]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


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
    """Rows from ``GET /api/v1/alerts?state=open``: a list of alerts, each in its latest state."""
    items = [a for a in body if isinstance(a, Mapping)] if isinstance(body, list) else []
    return tuple(_row(a, a.get("labels"), "", a.get("ts")) for a in items)
