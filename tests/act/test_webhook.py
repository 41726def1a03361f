"""The webhook and Slack receivers against a real local HTTP server: the body, the signature,
retries with backoff through the notifier, timeouts, and the audit of each delivery."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Sequence

import pytest

from stepwatch.act import (
    SIGNATURE_HEADER,
    AuditRecord,
    DeliveryError,
    Notification,
    Notifier,
    NotifyConfig,
    Retry,
    Route,
    SlackReceiver,
    WebhookReceiver,
)
from stepwatch.detect import AlertGroup, AlertState, LiveAlert
from stepwatch.model import Event

from ._notify_parts import WAIT_S, alert, recording_server

SECRET = "s3cret"
FAST = Retry(retries=3, backoff_s=0.01, max_backoff_s=0.05)


def _notification(*alerts: LiveAlert) -> Notification:
    group = AlertGroup({"kind": "straggler", "run": "r1"}, alerts)
    return Notification(
        "hook", "route:hook:{kind=straggler,run=r1}", group, "http://collector:7070"
    )


def test_the_body_is_the_group_as_json_with_its_links() -> None:
    first, second = (
        alert(rank="3", baseline=1.2),
        alert(rank="5", value=float("nan"), baseline=float("inf")),
    )
    with recording_server() as server:
        WebhookReceiver("hook", server.url + "/hook").send(_notification(first, second))
        (request,) = server.wait_for(1)
    assert request.path == "/hook"
    assert request.headers["Content-Type"] == "application/json"
    body = json.loads(request.body)
    assert body["status"] == "firing"
    assert body["receiver"] == "hook"
    assert body["groupLabels"] == {"kind": "straggler", "run": "r1"}
    assert body["commonLabels"]["run"] == "r1" and "rank" not in body["commonLabels"]
    assert [a["id"] for a in body["alerts"]] == [first.id, second.id]
    assert [a["labels"]["rank"] for a in body["alerts"]] == ["3", "5"]
    assert body["alerts"][1]["value"] == "NaN"  # spelled, never bare NaN
    assert [a["baseline"] for a in body["alerts"]] == [1.2, "+Inf"]
    assert body["alerts"][0]["url"] == f"http://collector:7070/#/alerts?run=r1&alert={first.id}"
    assert body["alerts"][0]["playbook"] == "what to do about straggler"
    assert SIGNATURE_HEADER not in request.headers  # no secret, no signature


def test_a_secret_signs_the_exact_body() -> None:
    with recording_server() as server:
        WebhookReceiver("hook", server.url, secret=SECRET).send(_notification(alert()))
        (request,) = server.wait_for(1)
    expected = hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
    assert request.headers[SIGNATURE_HEADER] == f"sha256={expected}"
    other = hmac.new(b"another", request.body, hashlib.sha256).hexdigest()
    assert request.headers[SIGNATURE_HEADER] != f"sha256={other}"


@pytest.mark.parametrize(
    ("status", "retryable"), [(500, True), (503, True), (429, True), (400, False), (404, False)]
)
def test_an_error_answer_says_whether_to_retry(status: int, retryable: bool) -> None:
    with recording_server(answers=[status]) as server:
        with pytest.raises(DeliveryError, match=f"HTTP {status}") as caught:
            WebhookReceiver("hook", server.url).send(_notification(alert()))
    assert caught.value.retryable is retryable


def test_a_receiver_that_does_not_answer_in_time_fails_retryably() -> None:
    with recording_server(slow=True) as server:
        hook = WebhookReceiver("hook", server.url, timeout_s=0.2)
        with pytest.raises(DeliveryError, match="no answer") as caught:
            hook.send(_notification(alert()))
    assert caught.value.retryable


def test_nobody_listening_is_a_retryable_failure() -> None:
    with recording_server() as server:
        url = server.url
    with pytest.raises(DeliveryError, match="could not reach") as caught:
        WebhookReceiver("hook", url, timeout_s=2).send(_notification(alert()))
    assert caught.value.retryable


def test_backoff_grows_and_is_capped_with_jitter() -> None:
    retry = Retry(retries=10, backoff_s=1.0, max_backoff_s=8.0)
    for attempt, full in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (7, 8.0)]:
        delays = [retry.delay(attempt) for _ in range(50)]
        assert all(full / 2 <= d <= full for d in delays)
        assert len(set(delays)) > 1  # jittered


class Audit:
    """Collects what the notifier records; wakes a waiter at each event."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.arrived = threading.Condition()

    def __call__(self, events: Sequence[Event]) -> None:
        with self.arrived:
            self.events += events
            self.arrived.notify_all()

    def wait_for(self, count: int) -> list[AuditRecord]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.events) >= count, WAIT_S)
            return [AuditRecord.from_event(e) for e in self.events]


def _notifier(url: str, audit: Audit, retry: Retry = FAST) -> Notifier:
    hook = WebhookReceiver("hook", url, secret=SECRET, timeout_s=5, retry=retry)
    config = NotifyConfig({"hook": hook}, Route("hook", group_wait=0.0))
    return Notifier(config, audit)


def test_the_notifier_retries_a_server_error_then_succeeds_and_audits_it() -> None:
    audit = Audit()
    with recording_server(answers=[500, 502]) as server:
        notifier = _notifier(server.url, audit).start()
        try:
            fired = alert()
            notifier.submit(fired)
            (record,) = audit.wait_for(1)
        finally:
            notifier.stop()
        requests = server.wait_for(3)
    assert len(requests) == 3
    assert len({r.body for r in requests}) == 1  # the same message each time
    assert record.action == "notify" and record.actor == "hook"
    assert record.result == "ok"
    assert record.detail["attempts"] == 3 and len(record.detail["errors"]) == 2
    assert record.alert_id == fired.id and record.kind == "straggler"
    assert record.labels == {"run": "r1"}


def test_a_receiver_that_stays_down_is_audited_as_failed_after_its_retries() -> None:
    audit = Audit()
    with recording_server(answers=[500] * 10) as server:
        notifier = _notifier(server.url, audit, Retry(2, 0.01, 0.02)).start()
        try:
            notifier.submit(alert())
            (record,) = audit.wait_for(1)
        finally:
            notifier.stop()
        assert len(server.requests) == 3  # the first try and two retries
    assert record.result == "failed"
    assert "HTTP 500" in record.detail["errors"][-1]


def test_a_refused_message_is_not_retried() -> None:
    audit = Audit()
    with recording_server(answers=[400]) as server:
        notifier = _notifier(server.url, audit).start()
        try:
            notifier.submit(alert())
            (record,) = audit.wait_for(1)
        finally:
            notifier.stop()
        assert len(server.requests) == 1
    assert record.result == "failed" and record.detail["attempts"] == 1


def test_submit_never_waits_on_a_slow_receiver() -> None:
    audit = Audit()
    with recording_server(slow=True) as server:
        notifier = _notifier(server.url, audit).start()
        try:
            notifier.submit(alert(rank="1"))
            server.wait_for(1)  # the receiver is now stuck on the first message
            for rank in range(2, 50):
                notifier.submit(alert(rank=str(rank)))  # returns although nothing is delivered
            assert not audit.events
        finally:
            server.released.set()
            notifier.stop()
    assert audit.wait_for(1)[0].result == "ok"


def test_a_full_outbox_drops_the_new_message_and_audits_it() -> None:
    audit = Audit()
    with recording_server(slow=True) as server:
        hook = WebhookReceiver("hook", server.url, timeout_s=30, retry=FAST)
        route = Route("hook", group_by=("rank",), group_wait=0.0)
        notifier = Notifier(NotifyConfig({"hook": hook}, route), audit, max_outbox=2).start()
        try:
            notifier.submit(alert(rank="1"))
            server.wait_for(1)  # stuck on the first message; two more may wait
            for rank in range(2, 5):
                notifier.submit(alert(rank=str(rank)))
            (dropped,) = audit.wait_for(1)
        finally:
            server.released.set()
            notifier.stop()
    assert dropped.result == "failed" and dropped.labels == {"run": "r1", "rank": "4"}
    assert "2 messages already wait" in dropped.detail["errors"][0]
    assert sorted(r.result for r in audit.wait_for(4)) == ["failed", "ok", "ok", "ok"]


def test_slack_gets_text_blocks_and_a_coloured_attachment() -> None:
    alerts = [alert(rank=str(r)) for r in range(12)]
    with recording_server() as server:
        SlackReceiver("chat", server.url).send(_notification(*alerts))
        (request,) = server.wait_for(1)
    body = json.loads(request.body)
    assert body["text"].startswith("[FIRING:12] ")
    assert body["blocks"][0]["type"] == "header"
    sections = [b for b in body["blocks"] if b["type"] == "section"]
    assert len(sections) == 10
    assert "straggler at 1.8" in sections[0]["text"]["text"]
    assert body["blocks"][-1]["elements"][0]["text"] == "and 2 more"
    assert body["attachments"][0]["color"] == "#e8a33d"
    ended = alert(state=AlertState.RESOLVED)
    with recording_server() as server:
        SlackReceiver("chat", server.url).send(_notification(ended))
        (request,) = server.wait_for(1)
    body = json.loads(request.body)
    assert body["text"].startswith("[RESOLVED:1] ")
    assert body["attachments"][0]["color"] == "#2eb67d"


def test_stopping_sends_what_still_waits_for_its_group() -> None:
    audit = Audit()
    with recording_server() as server:
        hook = WebhookReceiver("hook", server.url, retry=FAST)
        config = NotifyConfig({"hook": hook}, Route("hook", group_wait=3600.0))
        notifier = Notifier(config, audit).start()
        notifier.submit(alert())
        notifier.stop()
        assert len(server.wait_for(1)) == 1
    assert audit.wait_for(1)[0].result == "ok"
