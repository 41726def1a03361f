"""Audit records: round trip through a store event, and refusal of what is not one."""

from __future__ import annotations

import pytest

from stepwatch.act import AUDIT_EVENT, AuditRecord
from stepwatch.model import Event


def test_an_audit_record_round_trips_through_an_event() -> None:
    record = AuditRecord(
        "command", "policy:loss_divergence", "lower_lr(0.5)", "ok",
        labels={"run": "r1"}, alert_id="a1", kind="loss_divergence", detail={"factor": 0.5},
    )  # fmt: skip
    event = record.to_event(12.0)
    assert (event.kind, event.ts, event.text, event.labels) == (
        AUDIT_EVENT,
        12.0,
        "lower_lr(0.5)",
        {"run": "r1"},
    )
    assert AuditRecord.from_event(event) == record


def test_unknown_actions_and_foreign_events_are_refused() -> None:
    with pytest.raises(ValueError, match="audit action"):
        AuditRecord("reboot", "me", "x", "ok")
    with pytest.raises(ValueError, match="not an audit record"):
        AuditRecord.from_event(Event(1.0, AUDIT_EVENT, "hand-made"))
