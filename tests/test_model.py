"""Reserved event kinds: every kind the collector writes is one, none a producer writes is."""

from __future__ import annotations

from stepwatch.act import ACTION_EVENT, AUDIT_EVENT, COMMAND_ACK_EVENT, COMMAND_EVENT
from stepwatch.detect import ALERT_EVENT, SILENCE_EVENT, SILENCE_EXPIRED_EVENT
from stepwatch.detect.live._live import RULES_ERROR_EVENT, RULES_LOADED_EVENT
from stepwatch.model import RECORD_KINDS
from stepwatch.server._detection import ACK_EVENT

#: What the SDK, the integrations, the agent, `stepwatch run` and the demo write.
PRODUCER_KINDS = {
    "log", "checkpoint", "eval", "epoch", "process_exit", "gpu_xid", "gpu_error",
    "gpu_recovered", "log_source_error", "host_error", "collector_error", "scrape_error",
    "command_applied", "step_skipped",
}  # fmt: skip


def test_every_kind_the_collector_writes_is_reserved() -> None:
    written = {
        ALERT_EVENT, ACK_EVENT, SILENCE_EVENT, SILENCE_EXPIRED_EVENT, COMMAND_EVENT,
        COMMAND_ACK_EVENT, ACTION_EVENT, AUDIT_EVENT, RULES_LOADED_EVENT, RULES_ERROR_EVENT,
    }  # fmt: skip
    assert written <= RECORD_KINDS


def test_no_kind_a_producer_writes_is_reserved() -> None:
    assert not PRODUCER_KINDS & RECORD_KINDS
