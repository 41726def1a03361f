"""The current-state tables: kept by the records in their own transaction, equal to a rebuild
from every record, paged by cursor, filtered in SQL, and blind to how long the history is."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepwatch.model import Event, RecordBatch, Run
from stepwatch.store import ActionQuery, AlertQuery, AuditQuery, Store

from .conftest import T0, FakeClock

SOURCE = "stepwatch.collector"
TABLES = ("alert_state", "silence_state", "command_state", "action_state")


def alert(aid: str, state: str, ts: float, run: str | None = "r1", **more: object) -> Event:
    labels = {} if run is None else {"run": run}
    data = {"id": aid, "rule": "R", "kind": "loss_spike", "state": state}
    data |= {"severity": "warning", "since": ts} | more
    return Event(ts, "alert", f"loss_spike {state}", labels, data)


def ack(aid: str, ts: float, by: str = "ana") -> Event:
    return Event(ts, "alert_ack", "seen", {"run": "r1"}, {"id": aid, "by": by, "comment": "seen"})


def write(store: Store, *events: Event) -> None:
    store.apply([RecordBatch.of(SOURCE, list(events))])


def tables(store: Store) -> dict[str, list[tuple[object, ...]]]:
    with store._txn() as cur:
        return {t: sorted(cur.execute(f"SELECT * FROM {t}").fetchall(), key=str) for t in TABLES}


def test_an_alert_is_its_newest_transition_with_its_ack(store: Store) -> None:
    write(store, alert("a", "firing", T0), alert("b", "firing", T0 + 1))
    write(store, alert("a", "resolved", T0 + 2), ack("b", T0 + 3))
    a, b = store.current.alert("a"), store.current.alert("b")
    assert a is not None and (a.state, a.acked, a.open) == ("resolved", False, False)
    assert b is not None and (b.state, b.acked_by, b.ack_comment) == ("firing", "ana", "seen")
    assert [r.id for r in store.current.open_alerts()] == ["b"]
    assert store.current.alert("nope") is None
    assert b.event().data["state"] == "firing" and b.event().kind == "alert"


def test_an_ack_before_its_alert_acknowledges_nothing(store: Store) -> None:
    write(store, ack("a", T0), alert("a", "firing", T0 + 1))
    found = store.current.alert("a")
    assert found is not None and not found.acked
    store.rebuild_state()
    assert not store.current.alert("a").acked  # type: ignore[union-attr]


def record(kind: str, i: int, choice: str) -> Event:
    """One record of any family, on a handful of ids so that records of one id meet."""
    run = {"run": "r1"}
    return {
        "alert": lambda: alert(f"a{i}", choice, T0),
        "alert_ack": lambda: ack(f"a{i}", T0),
        "silence": lambda: Event(
            T0, kind, "", {}, {"id": f"s{i}", "matchers": ["a=b"], "starts": T0, "ends": T0 + 9}
        ),
        "silence_expired": lambda: Event(T0, kind, "", {}, {"id": f"s{i}", "by": "x"}),
        "command": lambda: Event(
            T0, kind, "", run, {"id": f"c{i}", "seq": i, "action": "stop", "args": {}, **run}
        ),
        "command_ack": lambda: Event(T0, kind, "", run, {"id": f"c{i}", "result": choice, **run}),
        "action": lambda: Event(T0, kind, "", run, {"id": f"x{i}", "state": choice, "created": T0}),
    }[kind]()


_records = st.lists(
    st.lists(
        st.builds(
            record,
            st.sampled_from(
                ["alert", "alert_ack", "silence", "silence_expired", "command", "command_ack"]
                + ["action"]
            ),
            st.integers(0, 3),
            st.sampled_from(["firing", "resolved", "pending", "ok", "failed"]),
        ),
        min_size=1,
        max_size=6,
    ),
    max_size=6,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=_records)
def test_folding_batch_by_batch_equals_a_rebuild_from_every_record(
    tmp_path: Path, batches: list[list[Event]]
) -> None:
    path = tmp_path / f"p{abs(hash(str(batches)))}.duckdb"
    with Store(path, clock=FakeClock()) as store:
        for events in batches:
            write(store, *events)
        folded = tables(store)
        newest: dict[str, str] = {}
        for e in (e for events in batches for e in events if e.kind == "alert"):
            newest[e.data["id"]] = e.data["state"]
        shown = store.current.alerts(AlertQuery(state="all"), limit=100).items
        assert {r.id: r.state for r in shown} == newest
        store.rebuild_state()
        assert tables(store) == folded


def test_cursor_paging_returns_every_alert_once_newest_first(store: Store) -> None:
    write(store, *[alert(f"a{i:02}", "firing", T0 + i // 3) for i in range(50)])
    seen, cursor = [], None
    while True:
        got = store.current.alerts(AlertQuery(), cursor, limit=7)
        seen += got.items
        if got.cursor is None:
            break
        cursor = got.cursor
    assert sorted(r.id for r in seen) == [f"a{i:02}" for i in range(50)]
    assert [(r.ts, r.id) for r in seen] == sorted(((r.ts, r.id) for r in seen), reverse=True)
    with pytest.raises(ValueError, match="cursor"):
        store.current.alerts(AlertQuery(), "not-a-cursor")


def test_filters_run_in_sql(store: Store) -> None:
    store.upsert_run(Run("r1", project="p1", start=T0))
    store.upsert_run(Run("r2", project="p2", start=T0))
    write(
        store,
        alert("a", "firing", T0, "r1"),
        alert("b", "firing", T0 + 1, "r2", severity="critical", kind="gpu_hot"),
        alert("c", "resolved", T0 + 2, "r1"),
        alert("d", "firing", T0 + 3, None),
    )

    def ids(**query: object) -> list[str]:
        return [r.id for r in store.current.alerts(AlertQuery(**query)).items]  # type: ignore[arg-type]

    assert ids() == ["d", "b", "a"]
    assert ids(state="all") == ["d", "c", "b", "a"]
    assert ids(state="resolved") == ["c"]
    assert ids(run="r1", state="all") == ["c", "a"]
    assert ids(projects={"p2"}) == ["b"]
    assert ids(projects=set()) == []
    assert ids(kind="gpu_hot") == ids(severity="critical") == ["b"]
    assert ids(since=T0 + 1, until=T0 + 2, state="all") == ["c", "b"]
    assert store.current.open_alert_counts(["r1", "r2", "r3"]) == {"r1": 1, "r2": 1}
    assert [s.open_alerts for s in store.run_summaries(run="r1")] == [1]
    assert [s.run.id for s in store.run_summaries(projects={"p2"})] == ["r2"]


def test_silences_commands_and_actions_keep_their_open_rows(store: Store, clock: FakeClock) -> None:
    store.upsert_run(Run("r1", start=T0))
    store.upsert_run(Run("r2", start=T0, status="finished"))
    silence = {"matchers": ["node=n1"], "starts": T0, "ends": T0 + 60, "created_by": "ana"}
    command = {"run": "r2", "action": "stop", "args": {}}
    write(
        store,
        Event(T0, "silence", "", {}, {"id": "s1", **silence}),
        Event(T0, "silence", "", {}, {"id": "s2", **silence}),
        Event(T0 + 1, "silence_expired", "", {}, {"id": "s2", "by": "bo"}),
        Event(T0, "command", "", {"run": "r2"}, {"id": "c1", "seq": 1, **command}),
        Event(T0, "command", "", {"run": "r2"}, {"id": "c2", "seq": 2, **command}),
        Event(T0 + 1, "command_ack", "", {"run": "r2"}, {"id": "c1", "run": "r2", "result": "ok"}),
        Event(T0, "action", "", {"run": "r1"}, {"id": "x1", "state": "pending", "created": T0}),
        Event(T0 + 1, "action", "", {"run": "r1"}, {"id": "x1", "state": "ok", "created": T0}),
        Event(T0 + 2, "action", "", {"run": "r2"}, {"id": "x2", "state": "queued", "created": T0}),
    )  # fmt: skip
    assert [s["id"] for s in store.current.silences(clock())] == ["s1"]
    assert [s["expired_at"] for s in store.current.silences(clock(), include_ended=True)] == [
        None,
        T0 + 1,
    ]
    assert [s["id"] for s in store.current.silences(T0 + 61)] == []
    assert [(c["id"], c["status"]) for c in store.current.commands("r2")] == [
        ("c1", "ok"),
        ("c2", "pending"),
    ]
    assert [c["id"] for c in store.current.commands(live=True)] == ["c2"]
    assert [a["state"] for a in store.current.actions().items] == ["queued", "ok"]
    assert [a["id"] for a in store.current.actions(ActionQuery(states={"queued"})).items] == ["x2"]


def test_audit_pages_below_the_head(store: Store) -> None:
    records = [
        Event(T0 + i, "audit", f"did {i}", {}, {"action": "command" if i % 3 else "notify"})
        for i in range(100)
    ]  # fmt: skip
    write(store, *records, alert("a", "firing", T0))
    seen, cursor = [], None
    while True:
        got = store.current.audit(AuditQuery(action="notify"), cursor, limit=4)
        seen += got.items
        if got.cursor is None:
            break
        cursor = got.cursor
    assert [e.text for e in seen] == [f"did {i}" for i in range(99, -1, -1) if i % 3 == 0]


def test_an_alert_fired_a_million_records_ago_is_still_open(store_path: Path) -> None:
    with Store(store_path, clock=FakeClock()) as store:
        write(store, alert("old", "firing", T0), alert("gone", "firing", T0))
    # the history is bulk-written: what matters here is its length, not its hash chain
    with Store(store_path, clock=FakeClock()) as store, store._txn() as cur:
        cur.execute(
            """INSERT INTO records SELECT 3 + i, ?, 'audit', 'x', 'r1', '{}', '{}', '', ''
            FROM range(1000000) t(i)""",
            [T0],
        )
    with Store(store_path, clock=FakeClock()) as store:
        write(store, alert("gone", "resolved", T0 + 1), alert("new", "firing", T0 + 2))
        assert [r.id for r in store.current.open_alerts()] == ["old", "new"]
        assert store.current.alert("old").state == "firing"  # type: ignore[union-attr]
