"""The alerts and silences API from the command line: an HTTP client and its tables."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

import httpx
from rich.table import Table

from .._text import format_duration, plural, unreachable
from .._tls import ClientTls

__all__ = [
    "AlertsClient",
    "ClientError",
    "alert_groups_table",
    "alerts_table",
    "human_time",
    "silences_table",
    "unknown_group_labels",
]

#: What alerts can be grouped by besides their labels.
GROUP_FIELDS = ("kind", "severity")


class ClientError(RuntimeError):
    """The collector could not be reached, or refused the request (its message included)."""


class AlertsClient:
    """Talks to a collector's alerts and silences routes.

    Args:
        url: the collector, e.g. ``http://127.0.0.1:7070``.
        token: sent as ``Authorization: Bearer TOKEN`` when given.
        tls: the CA to trust and the client certificate, for an ``https://`` URL.
        transport: an httpx transport (tests and embedding); the network by default.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        tls: ClientTls | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self._url,
            headers=headers,
            timeout=timeout_s,
            verify=(tls or ClientTls()).verify(url),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AlertsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ClientError(unreachable(self._url, exc)) from None
        if response.is_success:
            return response.json()
        try:
            message = response.json().get("error", response.text)
        except ValueError:
            message = response.text
        raise ClientError(f"{method} {path}: HTTP {response.status_code}: {message}")

    def alerts(
        self,
        run: str | None = None,
        state: str = "open",
        kind: str | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        params = _params(state=state, limit=limit, run=run, kind=kind)
        return list(self._call("GET", "/api/v1/alerts", params=params))

    def groups(
        self, by: str, run: str | None = None, state: str = "open", kind: str | None = None
    ) -> list[dict[str, Any]]:
        params = _params(by=by, state=state, run=run, kind=kind)
        return list(self._call("GET", "/api/v1/alerts/groups", params=params))

    def add_silence(
        self, matchers: Sequence[str], duration_s: float, comment: str = ""
    ) -> dict[str, Any]:
        body = {"matchers": list(matchers), "duration_s": duration_s, "comment": comment}
        return dict(self._call("POST", "/api/v1/silences", json=body))

    def silences(self, include_ended: bool = False) -> list[dict[str, Any]]:
        return list(self._call("GET", "/api/v1/silences", params={"all": include_ended}))

    def expire_silence(self, silence_id: str) -> dict[str, Any]:
        return dict(self._call("DELETE", f"/api/v1/silences/{silence_id}"))


def _table(title: str, columns: Sequence[str]) -> Table:
    """An empty table in the look every listing shares: title on the left, long cells folded."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _params(**given: Any) -> dict[str, Any]:
    """The query parameters that were given (None: left out)."""
    return {k: v for k, v in given.items() if v is not None}


def human_time(ts: float, now: float | None = None) -> str:
    """A time as people read it, local with its zone and how far from now:
    "2026-12-02 07:15 UTC (in 2h 00m)", "2026-12-02 05:03 UTC (4m 05s ago)"."""
    delta = round(ts - (time.time() if now is None else now))
    if delta == 0:
        near = "now"
    else:
        near = f"in {format_duration(delta)}" if delta > 0 else f"{format_duration(-delta)} ago"
    local = dt.datetime.fromtimestamp(ts).astimezone()
    return f"{local:%Y-%m-%d %H:%M %Z} ({near})"


def _when(ts: Any) -> str:
    """A table cell's time: ``human_time``, or blank when there is none."""
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        return "" if ts is None else str(ts)
    return human_time(ts)


def _entity(labels: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def unknown_group_labels(by: Sequence[str], groups: Sequence[dict[str, Any]]) -> str | None:
    """Why grouping ``by`` means nothing when one of its names is a label no alert has (a
    typo puts every alert in one group), else None."""
    labels = {k for g in groups for a in g["alerts"] for k in a["labels"]}
    unknown = [name for name in by if groups and name not in {*GROUP_FIELDS, *labels}]
    if not unknown:
        return None
    return (
        f"no alert has the label {unknown[0]!r}; group by {', '.join(GROUP_FIELDS)} or their "
        f"labels: {', '.join(sorted(labels))}"
    )


def alerts_table(alerts: Sequence[dict[str, Any]]) -> Table:
    """One row per alert: state, severity, kind, entity, since, what it says."""
    table = _table(
        plural(len(alerts), "alert"),
        ("id", "state", "severity", "kind", "labels", "since", "summary"),
    )
    for a in alerts:
        state = a["state"]
        marks = [m for m in ("silenced", "inhibited", "acked") if a.get(m)]
        if marks:
            state += f" ({', '.join(marks)})"
        summary = a.get("annotations", {}).get("summary", "")
        table.add_row(
            a["id"],
            state,
            a["severity"],
            a["kind"],
            _entity(a["labels"]),
            _when(a["since"]),
            summary,
        )
    return table


def alert_groups_table(groups: Sequence[dict[str, Any]]) -> Table:
    """One row per group: its labels, how many alerts, the worst severity, since when."""
    table = _table(
        plural(len(groups), "group"), ("group", "alerts", "severity", "since", "first summary")
    )
    for g in groups:
        first = g["alerts"][0].get("annotations", {}).get("summary", "") if g["alerts"] else ""
        table.add_row(
            _entity(g["labels"]), str(g["count"]), g["severity"], _when(g["since"]), first
        )
    return table


def silences_table(silences: Sequence[dict[str, Any]]) -> Table:
    """One row per silence: its matchers, window, who and why."""
    table = _table(
        plural(len(silences), "silence"),
        ("id", "matchers", "starts", "ends", "active", "by", "comment"),
    )
    for s in silences:
        table.add_row(
            s["id"],
            " ".join(s["matchers"]),
            _when(s["starts"]),
            _when(s["ends"]),
            "yes" if s["active"] else "no",
            s.get("created_by", ""),
            s.get("comment", ""),
        )
    return table
