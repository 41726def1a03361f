"""The actions and audit API from the command line: the alerts client's calls, and tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from ._alerts_client import AlertsClient, _entity, _params, _table, _when

__all__ = ["ActionsClient", "actions_table", "audit_table"]


class ActionsClient(AlertsClient):
    """Talks to a collector's actions and audit routes (and all the alerts client does)."""

    def actions(self, run: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("GET", "/api/v1/actions", params=_params(run=run, state=state)))

    def request(
        self, playbook: str, labels: Mapping[str, str], by: str, dry_run: bool | None = None
    ) -> dict[str, Any]:
        body = {"playbook": playbook, "labels": dict(labels), "by": by, "dry_run": dry_run}
        return dict(self._call("POST", "/api/v1/actions", json=body))

    def decide(self, action_id: str, verb: str, by: str, comment: str = "") -> dict[str, Any]:
        """``verb`` is ``approve`` or ``reject``."""
        body = {"by": by, "comment": comment}
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


def actions_table(actions: Sequence[dict[str, Any]]) -> Table:
    """One row per action: its id, playbook, entity, state, who asked and who decided."""
    table = _table(
        f"{len(actions)} actions",
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


def audit_table(records: Sequence[dict[str, Any]]) -> Table:
    """One row per audit record, newest first: when, what kind of act, who, what, result."""
    table = _table(
        f"{len(records)} audit records",
        ("time (UTC)", "action", "actor", "what", "result", "labels", "alert"),
    )
    for r in records:
        alert = " ".join(x for x in (r.get("kind", ""), r.get("alert_id", "")) if x)
        table.add_row(
            _when(r["ts"]),
            r["action"],
            r["actor"],
            r["what"],
            r["result"],
            _entity(r["labels"]),
            alert,
        )
    return table
