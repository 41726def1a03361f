"""Acting on alerts: notifying people, steering the training, remediation playbooks, and the
audit trail of all of it."""

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
from ._notify import Notifier
from ._notify_dispatch import Dispatch
from ._notify_message import Notification
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

__all__ = [
    "ACK_RESULTS",
    "AUDIT_ACTIONS",
    "AUDIT_EVENT",
    "AuditRecord",
    "COMMAND_ACK_EVENT",
    "COMMAND_EVENT",
    "Command",
    "CommandBook",
    "CommandError",
    "PolicyEngine",
    "command_args",
    "AlertmanagerReceiver",
    "DeliveryError",
    "Dispatch",
    "EmailReceiver",
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
]
