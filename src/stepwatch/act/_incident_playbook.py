"""An incident's playbooks: the allow-listed remediations its root cause's kind requests by
itself (``triggers``), each with the action an alert of the incident filed for it. Only read:
nothing here requests or runs anything."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._actions import Action
from ._playbook import Playbook

__all__ = ["IncidentPlaybook", "PlaybooksOf", "incident_playbooks", "no_playbooks"]


@dataclass(frozen=True, slots=True)
class IncidentPlaybook:
    """A playbook for an incident and the action filed for it, if any: ``status`` is the
    action's state (``pending`` waits for approval)."""

    name: str
    description: str = ""
    action_id: str | None = None
    status: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "action_id": self.action_id,
            "status": self.status,
        }

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> IncidentPlaybook:
        action_id, status = data["action_id"], data["status"]
        return cls(
            str(data["name"]),
            str(data["description"]),
            None if action_id is None else str(action_id),
            None if status is None else str(status),
        )


#: The playbooks of an incident from its root cause's kind and its alerts' ids.
PlaybooksOf = Callable[[str, Collection[str]], Sequence[IncidentPlaybook]]


def no_playbooks(kind: str, alert_ids: Collection[str]) -> list[IncidentPlaybook]:
    """The playbooks of every incident where none are configured."""
    return []


def incident_playbooks(
    entries: Sequence[Playbook], actions: Iterable[Action], alert_ids: Collection[str]
) -> list[IncidentPlaybook]:
    """Each of ``entries`` (those the root cause's kind triggers), with the newest action
    (``actions`` come newest first) that one of the alerts ``alert_ids`` filed for it."""
    ids = set(alert_ids)
    filed: dict[str, Action] = {}
    for action in actions:
        if action.alert_id in ids:
            filed.setdefault(action.playbook, action)
    out = []
    for entry in entries:
        found = filed.get(entry.name)
        if found is None:
            out.append(IncidentPlaybook(entry.name, entry.description))
        else:
            out.append(IncidentPlaybook(entry.name, entry.description, found.id, found.state))
    return out
