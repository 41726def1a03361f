"""An action: one requested run of a playbook, from request through approval to its outcome.

Each change of state is stored as an event of kind ``action`` holding the whole action, so the
latest event of an id is the action as it stands (and a restarted collector reads them back).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model import Event

__all__ = ["ACTION_EVENT", "ACTION_STATES", "FINAL_STATES", "Action", "ActionState"]

#: The event kind of an action's state in the store.
ACTION_EVENT = "action"


class ActionState:
    """Where an action is: waiting for a person, waiting for the runner, running, or done."""

    PENDING = "pending"  # destructive: waits for approval
    QUEUED = "queued"
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    REJECTED = "rejected"


ACTION_STATES = tuple(v for k, v in vars(ActionState).items() if k.isupper())
#: States an action never leaves.
FINAL_STATES = (ActionState.OK, ActionState.FAILED, ActionState.TIMEOUT, ActionState.REJECTED)


@dataclass(frozen=True, slots=True)
class Action:
    """One run of ``playbook`` on the entity of ``labels``, requested by ``requested_by`` (a
    person, or ``alert:<kind>``) and, when destructive, decided by ``decided_by`` after the
    ``approvals`` so far. The outcome is the exit code and the tails of stdout and stderr."""

    id: str
    playbook: str
    labels: dict[str, str]
    dry_run: bool
    state: str
    requested_by: str
    created: float
    updated: float
    alert_id: str = ""
    kind: str = ""
    decided_by: str = ""
    comment: str = ""
    command: str = ""
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    error: str = ""
    approvals: tuple[str, ...] = ()

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex[:16]

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def but(self, **changes: Any) -> Action:
        return dataclasses.replace(self, **changes)

    def as_json(self) -> dict[str, Any]:
        """The fields the API shows."""
        out = dataclasses.asdict(self)
        out["labels"] = dict(self.labels)
        out["approvals"] = list(self.approvals)
        return out

    def to_event(self) -> Event:
        """The store's form: the entity's labels, the rest in ``data``."""
        text = f"{self.playbook} {self.state}" + (" (dry run)" if self.dry_run else "")
        return Event(self.updated, ACTION_EVENT, text, dict(self.labels), self.as_json())

    @classmethod
    def from_event(cls, event: Event) -> Action:
        """Back from the store; a ValueError for an event of another shape."""
        return cls.from_json(event.data)

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> Action:
        """Back from ``as_json`` (a stored action's data); a ValueError for another shape."""
        names = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in fields.items() if k in names}
        data["approvals"] = tuple(data.get("approvals") or ())
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"not an action: {exc}") from None
