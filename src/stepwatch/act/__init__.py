"""Acting on alerts: notifying people, steering the training, remediation playbooks, and the
audit trail of all of it."""

from ._actions import ACTION_EVENT, ACTION_STATES, Action, ActionState, latest_actions
from ._actions_flow import ActionConflict, NotAllowed, Remediation, UnknownAction
from ._audit import AUDIT_ACTIONS, AUDIT_EVENT, AuditRecord
from ._playbook import PLAYBOOK_KINDS, Playbook, PlaybookError, Prepared
from ._playbook_file import Playbooks, load_playbooks, parse_playbooks
from ._runner import Outcome, Runner, run_process

__all__ = [
    "ACTION_EVENT",
    "ACTION_STATES",
    "AUDIT_ACTIONS",
    "AUDIT_EVENT",
    "Action",
    "ActionConflict",
    "ActionState",
    "AuditRecord",
    "NotAllowed",
    "Outcome",
    "PLAYBOOK_KINDS",
    "Playbook",
    "PlaybookError",
    "Playbooks",
    "Prepared",
    "Remediation",
    "Runner",
    "UnknownAction",
    "latest_actions",
    "load_playbooks",
    "parse_playbooks",
    "run_process",
]
