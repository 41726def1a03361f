"""Acting on alerts: notifying people, steering the training, remediation playbooks, and the
audit trail of all of it."""

from ._actions import ACTION_EVENT, ACTION_STATES, FINAL_STATES, Action, ActionState
from ._actions_flow import ActionConflict, NotAllowed, Remediation, UnknownAction
from ._analyst import AnalystConfig, AnalystError
from ._audit import AUDIT_ACTIONS, AUDIT_EVENT, AuditRecord
from ._commands import (
    ACK_RESULTS,
    COMMAND_ACK_EVENT,
    COMMAND_EVENT,
    Command,
    CommandBook,
    CommandError,
    command_args,
)
from ._incident_playbook import IncidentPlaybook, PlaybooksOf, incident_playbooks, no_playbooks
from ._notify import Notifier
from ._notify_dispatch import Dispatch
from ._notify_message import IncidentNote, Notification
from ._playbook import PLAYBOOK_KINDS, Playbook, PlaybookError, Prepared
from ._playbook_file import Playbooks, load_playbooks, parse_playbooks
from ._policies import (
    COMMAND_ACTIONS,
    NOTIFY,
    POLICY_ACTIONS,
    Policies,
    Policy,
    PolicyStep,
    parse_policies,
)
from ._policy import PolicyEngine
from ._receivers import (
    SIGNATURE_HEADER,
    DeliveryError,
    Receiver,
    Retry,
    SlackReceiver,
    WebhookReceiver,
    sign,
)
from ._receivers_alertmanager import AlertmanagerReceiver
from ._receivers_mail import EmailReceiver
from ._routing import Route
from ._routing_config import NotifyConfig, load_notify_config, parse_notify_config
from ._runner import Outcome, Runner, run_process
from ._state import History

__all__ = [
    "ACK_RESULTS",
    "ACTION_EVENT",
    "ACTION_STATES",
    "FINAL_STATES",
    "AUDIT_ACTIONS",
    "AUDIT_EVENT",
    "Action",
    "ActionConflict",
    "AnalystConfig",
    "AnalystError",
    "ActionState",
    "AuditRecord",
    "AlertmanagerReceiver",
    "DeliveryError",
    "Dispatch",
    "EmailReceiver",
    "History",
    "IncidentNote",
    "IncidentPlaybook",
    "Notification",
    "Notifier",
    "NotifyConfig",
    "Receiver",
    "Retry",
    "Route",
    "SIGNATURE_HEADER",
    "SlackReceiver",
    "WebhookReceiver",
    "load_notify_config",
    "parse_notify_config",
    "sign",
    "COMMAND_ACK_EVENT",
    "COMMAND_EVENT",
    "Command",
    "CommandBook",
    "CommandError",
    "NotAllowed",
    "Outcome",
    "PLAYBOOK_KINDS",
    "Playbook",
    "PlaybookError",
    "COMMAND_ACTIONS",
    "NOTIFY",
    "POLICY_ACTIONS",
    "Policies",
    "Policy",
    "PolicyEngine",
    "PolicyStep",
    "PlaybooksOf",
    "parse_policies",
    "Playbooks",
    "Prepared",
    "Remediation",
    "Runner",
    "UnknownAction",
    "command_args",
    "incident_playbooks",
    "no_playbooks",
    "load_playbooks",
    "parse_playbooks",
    "run_process",
]
