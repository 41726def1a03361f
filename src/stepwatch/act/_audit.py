"""The audit trail: every notification, command, approval and playbook run is an event of kind
``audit`` saying who or what acted, on what, why (the alert) and with what result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import Event

__all__ = ["AUDIT_ACTIONS", "AUDIT_EVENT", "AuditRecord"]

#: The event kind of audit records in the store.
AUDIT_EVENT = "audit"
#: What an audit record can be about.
AUDIT_ACTIONS = ("notify", "command", "approval", "playbook", "policy")


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One thing done: ``action`` (one of ``AUDIT_ACTIONS``), by ``actor`` (a person, a policy,
    a receiver), on ``labels`` (run, node, rank...), because of ``alert_id`` / ``kind``, with a
    ``result`` (``ok``, ``failed``, ``pending``, ``dry-run``...) and free ``detail``."""

    action: str
    actor: str
    what: str
    result: str
    labels: dict[str, str] = field(default_factory=dict)
    alert_id: str = ""
    kind: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.action not in AUDIT_ACTIONS:
            raise ValueError(f"audit action must be one of {AUDIT_ACTIONS}, not {self.action!r}")

    def to_event(self, ts: float) -> Event:
        """The record as a store event (its text is ``what``; the rest in ``data``)."""
        data = {
            "action": self.action,
            "actor": self.actor,
            "result": self.result,
            "alert_id": self.alert_id,
            "kind": self.kind,
            "detail": dict(self.detail),
        }
        return Event(ts, AUDIT_EVENT, self.what, dict(self.labels), data)

    @classmethod
    def from_event(cls, event: Event) -> AuditRecord:
        """Back from the store; a ValueError for an event that is not an audit record."""
        d = event.data
        try:
            return cls(
                action=str(d["action"]),
                actor=str(d["actor"]),
                what=event.text,
                result=str(d["result"]),
                labels=dict(event.labels),
                alert_id=str(d.get("alert_id", "")),
                kind=str(d.get("kind", "")),
                detail=dict(d.get("detail") or {}),
            )
        except KeyError as exc:
            raise ValueError(f"not an audit record: no {exc}") from None
