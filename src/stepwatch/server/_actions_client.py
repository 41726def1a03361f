"""The actions and audit API from the command line: the alerts client's calls, tables, and
one action in full."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from .._text import plural
from ._alerts_client import AlertsClient, _entity, _params, _table, _when

__all__ = ["ActionsClient", "action_text", "actions_table", "audit_table"]

#: The fields of an audit record's detail that say why: a command's reason, an approval's
#: comment, a policy's decision, a refused request's error, a failed delivery's errors.
_WHY = ("reason", "comment", "why", "error", "errors")


class ActionsClient(AlertsClient):
    """Talks to a collector's actions and audit routes (and all the alerts client does)."""

    def actions(self, run: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("GET", "/api/v1/actions", params=_params(run=run, state=state)))

    def action(self, action_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/v1/actions/{action_id}"))

    def request(
        self, playbook: str, labels: Mapping[str, str], dry_run: bool | None = None
    ) -> dict[str, Any]:
        body = {"playbook": playbook, "labels": dict(labels), "dry_run": dry_run}
        return dict(self._call("POST", "/api/v1/actions", json=body))

    def tokens(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/api/v1/tokens"))

    def create_token(
        self, role: str, projects: Sequence[str], name: str | None, expires: str | None
    ) -> dict[str, Any]:
        body = {"role": role, "projects": list(projects), "name": name, "expires": expires}
        return dict(self._call("POST", "/api/v1/tokens", json=body))

    def revoke_token(self, key: str) -> dict[str, Any]:
        return dict(self._call("DELETE", f"/api/v1/tokens/{key}"))

    def decide(self, action_id: str, verb: str, comment: str = "") -> dict[str, Any]:
        """``verb`` is ``approve`` or ``reject`` (the token says who decides)."""
        body = {"comment": comment}
        return dict(self._call("POST", f"/api/v1/actions/{action_id}/{verb}", json=body))

    def audit(
        self,
        run: str | None = None,
        action: str | None = None,
        kind: str | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        params = _params(run=run, action=action, kind=kind, limit=limit)
        return list(self._call("GET", "/api/v1/audit", params=params))

    def audit_head(self) -> dict[str, Any]:
        """The last record's seq and the hash that chains every record before it."""
        return dict(self._call("GET", "/api/v1/audit/head"))


def actions_table(actions: Sequence[dict[str, Any]]) -> Table:
    """One row per action: its id, playbook, entity, state, who asked and who decided."""
    table = _table(
        plural(len(actions), "action"),
        ("id", "playbook", "labels", "state", "requested by", "decided by", "created"),
    )
    for a in actions:
        state = a["state"] + (" (dry run)" if a["dry_run"] else "")
        if a.get("exit_code") is not None:
            state += f", exit {a['exit_code']}"
        table.add_row(
            a["id"],
            a["playbook"],
            _entity(a["labels"]),
            state,
            a["requested_by"],
            a.get("decided_by", ""),
            _when(a["created"]),
        )
    return table


def _why(record: Mapping[str, Any]) -> str:
    """Why a record was made, from its detail and its alert: "no; alert gpu_thermal 3f2a"."""
    detail = record.get("detail") or {}
    said = [
        "; ".join(map(str, value)) if isinstance(value, list) else str(value)
        for key in _WHY
        if (value := detail.get(key))
    ]
    alert = _alert_of(record)
    return "; ".join(said + ([f"alert {alert}"] if alert else []))


def _alert_of(record: Mapping[str, Any]) -> str:
    """The alert an audit record or an action is about: "gpu_thermal 3f2a", or blank."""
    return " ".join(x for x in (record.get("kind", ""), record.get("alert_id", "")) if x)


def audit_table(records: Sequence[dict[str, Any]]) -> Table:
    """One row per audit record, newest first: when, what kind of act, who, what, result, why."""
    table = _table(
        plural(len(records), "audit record"),
        ("time", "action", "actor", "what", "result", "labels", "why"),
    )
    for r in records:
        table.add_row(
            _when(r["ts"]),
            r["action"],
            r["actor"],
            r["what"],
            r["result"],
            _entity(r["labels"]),
            _why(r),
        )
    return table


def _tail(name: str, text: str) -> list[str]:
    """A stream's kept end, indented under its name."""
    if not text:
        return [f"{name}: (nothing)"]
    return [f"{name}, its end:", textwrap.indent(text.rstrip("\n"), "  ")]


def action_text(a: Mapping[str, Any]) -> str:
    """One action in full: what ran where, its state, who asked and decided, its output."""
    state = a["state"] + (" (dry run)" if a["dry_run"] else "")
    if a.get("exit_code") is not None:
        state += f", exit {a['exit_code']} after {a.get('duration_s', 0):.2f} s"
    if a["state"] == "pending":
        decided = f"not yet: stepwatch actions approve {a['id']} (or reject)"
        if a.get("approvals"):
            decided += f"; approved so far by {', '.join(a['approvals'])}"
    else:
        decided = f"by {a['decided_by']}" if a.get("decided_by") else "no approval needed"
        decided += f": {a['comment']}" if a.get("comment") else ""
    alert = _alert_of(a)
    lines = [
        f"action {a['id']}: {a['playbook']} on {_entity(a['labels'])}",
        f"state:     {state}",
        f"command:   {a.get('command', '')}",
        f"requested: by {a['requested_by']}, {_when(a['created'])}",
        f"decided:   {decided}",
        f"updated:   {_when(a['updated'])}",
        *([f"alert:     {alert}"] if alert else []),
        *([f"error:     {a['error']}"] if a.get("error") else []),
        *_tail("stdout", a.get("stdout", "")),
        *_tail("stderr", a.get("stderr", "")),
    ]
    return "\n".join(lines)
