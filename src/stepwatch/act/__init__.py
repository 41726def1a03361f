"""Acting on alerts: notifying people, steering the training, remediation playbooks, and the
audit trail of all of it."""

from ._audit import AUDIT_ACTIONS, AUDIT_EVENT, AuditRecord

__all__ = ["AUDIT_ACTIONS", "AUDIT_EVENT", "AuditRecord"]
