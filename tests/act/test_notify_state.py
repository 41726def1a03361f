"""The notifier across restarts, against a real webhook receiver and a real store: a group
already told is not told again; a delivery audited after the checkpoint counts as sent; a
message cut short by the crash goes out again; the repeat interval runs on in wall time; an
unreadable snapshot is refused and the notifier starts empty."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from stepwatch.act import (
    AUDIT_EVENT,
    AuditRecord,
    Dispatch,
    Notifier,
    NotifyConfig,
    Retry,
    Route,
    WebhookReceiver,
)
from stepwatch.detect import AlertState
from stepwatch.model import Event, RecordBatch
from stepwatch.store import Store

from ._notify_parts import T0, WAIT_S, alert, recording_server

SOURCE = "stepwatch.collector"
FAST = Retry(retries=3, backoff_s=0.01, max_backoff_s=0.05)
ROUTE = Route("hook", group_wait=0.0, group_interval=60.0, repeat_interval=3600.0)


@dataclass
class Shifted:
    """A real clock moved on by ``by`` seconds: a later life of the collector."""

    clock: Callable[[], float]
    by: float = 0.0

    def __call__(self) -> float:
        return self.clock() + self.by


class Trail:
    """The audit trail in a real store, as the collector keeps it; wakes a waiter at each
    record."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.arrived = threading.Condition()

    def __call__(self, events: Sequence[Event]) -> None:
        with self.arrived:
            self.store.apply([RecordBatch.of(SOURCE, list(events))])
            self.arrived.notify_all()

    def since(self, ts: float) -> list[Event]:
        return self.store.records(kind=AUDIT_EVENT, start=ts)

    def wait_for(self, count: int) -> list[AuditRecord]:
        def audits() -> list[AuditRecord]:
            return [AuditRecord.from_event(e) for e in self.since(0.0)]

        with self.arrived:
            self.arrived.wait_for(lambda: len(audits()) >= count, WAIT_S)
            return audits()


@pytest.fixture
def trail(tmp_path: Path) -> Iterator[Trail]:
    with Store(tmp_path / "notify.duckdb") as store:
        yield Trail(store)


def _notifier(url: str, trail: Trail, later: float = 0.0, route: Route = ROUTE) -> Notifier:
    """One life's notifier; a later life's wall clock is ``later`` seconds on, and its
    monotonic clock starts from elsewhere (a new process)."""
    hook = WebhookReceiver("hook", url, retry=FAST)
    return Notifier(
        NotifyConfig({"hook": hook}, route), trail,
        clock=Shifted(time.time, later), monotonic=Shifted(time.monotonic, -later - 12345.0),
        history=trail.since,
    )  # fmt: skip


def _sent_once(url: str, trail: Trail, *alerts_: object) -> bytes:
    """A first life that tells the receiver of ``alerts_``; its snapshot after the audit."""
    first = _notifier(url, trail).start()
    try:
        for a in alerts_:
            first.submit(a)  # type: ignore[arg-type]
        trail.wait_for(len(alerts_))
        return first.snapshot()
    finally:
        first.stop()


def test_a_group_already_told_is_not_told_again(trail: Trail) -> None:
    with recording_server() as server:
        state = _sent_once(server.url, trail, alert())
        after = _notifier(server.url, trail, later=5.0)
        after.restore(state)
        after.start()
        after.submit(alert())  # a recovery replay hands the transition over again
        after.stop()  # sends whatever it still holds
        assert len(server.wait_for(2, timeout=1.0)) == 1


def test_a_delivery_audited_after_the_checkpoint_counts_as_sent(trail: Trail) -> None:
    with recording_server() as server:
        first = _notifier(server.url, trail).start()
        state = first.snapshot()  # before the alert
        first.submit(alert())
        trail.wait_for(1)
        first.stop()  # the collector dies here, its checkpoint older than the message
        after = _notifier(server.url, trail, later=5.0)
        after.restore(state)
        after.start()
        after.submit(alert())
        after.stop()
        assert len(server.wait_for(2, timeout=1.0)) == 1


def test_a_resolution_told_after_the_checkpoint_is_not_told_again(trail: Trail) -> None:
    resolved = alert(state=AlertState.RESOLVED)
    with recording_server() as server:
        first = _notifier(server.url, trail, route=Route("hook", group_wait=0.0, group_interval=0))
        state = first.snapshot()
        first.start()
        first.submit(alert())
        trail.wait_for(1)
        first.submit(resolved)
        trail.wait_for(2)
        first.stop()
        after = _notifier(server.url, trail, later=5.0)
        after.restore(state)
        after.start()
        after.submit(alert())  # the replay: an alert that fired and ended fires again
        after.stop()
        assert len(server.wait_for(3, timeout=1.0)) == 2


def test_a_message_cut_short_by_the_crash_is_sent_again(trail: Trail) -> None:
    with recording_server(slow=True) as down:  # answers nothing until the test ends
        first = _notifier(down.url, trail).start()
        first.submit(alert())
        down.wait_for(1)
        state = first.snapshot()  # the message is on its way, not delivered
        with recording_server() as up:
            after = _notifier(up.url, trail, later=5.0)
            after.restore(state)
            after.start()
            (request,) = up.wait_for(1)
            after.stop()
        assert json.loads(request.body)["alerts"][0]["id"] == alert().id
    first.stop()


def test_the_repeat_interval_runs_on_in_wall_time(trail: Trail) -> None:
    with recording_server() as server:
        state = _sent_once(server.url, trail, alert())
        early = _notifier(server.url, trail, later=1800.0)  # half the repeat interval on
        early.restore(state)
        early.start()
        early.submit(alert())
        early.stop()
        assert len(server.wait_for(2, timeout=1.0)) == 1
        late = _notifier(server.url, trail, later=3601.0)  # past it: sent again, unasked
        late.restore(state)
        late.start()
        try:
            requests = server.wait_for(2)
        finally:
            late.stop()
    assert len(requests) == 2
    assert [r.result for r in trail.wait_for(2)] == ["ok", "ok"]


def test_the_dispatch_state_round_trips_with_its_times() -> None:
    route = Route("hook", group_wait=30.0, group_interval=300.0, repeat_interval=3600.0)
    first, again = Dispatch(route), Dispatch(route)
    first.add(alert(rank="1"), T0)
    first.due(T0 + 30)
    first.add(alert(rank="2"), T0 + 60)  # waits for the group interval
    first.add(alert(rank="3", state=AlertState.RESOLVED), T0 + 61)  # never heard firing
    again.load(first.state(lambda t: t + 1e6), lambda t: t - 1e6 + 7.0)  # clocks 7 s apart
    assert again.next_due() == first.next_due() + 7.0
    assert again.state(float) == first.state(lambda t: t + 7.0)
    (sent,) = again.due(T0 + 330 + 7.0)
    assert sorted(a.labels["rank"] for a in sent.alerts) == ["1", "2"]


@pytest.mark.parametrize(
    "state",
    [
        b"",
        b"\xff\xfe",
        b'"format"',
        b'{"format": 2, "taken": 1}',
        b'{"format": 1, "taken": 1, "dispatch": {}, "inbox": [], "unsent": []}',
        b'{"format": 1, "taken": 1, "dispatch": {"groups": [{"path": "route"}], "ended": [],'
        b' "heard": {}}, "inbox": [], "unsent": []}',
        b'{"format": 1, "taken": 1, "dispatch": {"groups": [], "ended": [], "heard": {}},'
        b' "inbox": [{"id": "x"}], "unsent": []}',
    ],
)
def test_an_unreadable_snapshot_is_refused_and_the_notifier_starts_empty(
    state: bytes, trail: Trail
) -> None:
    with recording_server() as server:
        notifier = _notifier(server.url, trail)
        with pytest.raises(ValueError, match="the notify checkpoint"):
            notifier.restore(state)
        notifier.start()
        notifier.submit(alert())
        notifier.stop()
        assert len(server.wait_for(1)) == 1
