"""Runs (insert, replace, list, finish) and events (filters, limit) as the API reads them."""

from __future__ import annotations

import pytest

from stepwatch.model import Event, Run, RunStatus, SeriesKey
from stepwatch.store import Store

from .conftest import T0, FakeClock, batch


def test_runs_round_trip_and_replace(store: Store) -> None:
    run = Run(
        "r1",
        project="llm",
        name="7b",
        config={"lr": 3e-4, "layers": [1, 2]},
        start=T0,
        labels={"team": "a"},
        planned_total_steps=1000,
    )
    store.upsert_run(run)
    assert store.get_run("r1") == run
    run.name = "7b-again"
    store.upsert_run(run)
    assert store.get_run("r1") == run
    assert store.get_run("r2") is None
    assert store.stats()["runs"] == 1


def test_list_runs_newest_first_with_filters(store: Store) -> None:
    store.upsert_run(Run("old", project="a", start=T0))
    store.upsert_run(Run("new", project="a", start=T0 + 10, status=RunStatus.FAILED))
    store.upsert_run(Run("mid", project="b", start=T0 + 5))
    assert [r.id for r in store.list_runs()] == ["new", "mid", "old"]
    assert [r.id for r in store.list_runs(project="a")] == ["new", "old"]
    assert [r.id for r in store.list_runs(status=RunStatus.RUNNING)] == ["mid", "old"]
    assert [r.id for r in store.list_runs("a", RunStatus.FAILED)] == ["new"]
    assert store.list_runs(project="c") == []


def test_finish_run(store: Store, clock: FakeClock) -> None:
    store.upsert_run(Run("r1", start=T0))
    clock.now = T0 + 60
    done = store.finish_run("r1", RunStatus.FINISHED)
    assert (done.status, done.end) == ("finished", T0 + 60)
    assert store.get_run("r1") == done
    assert store.finish_run("r1", RunStatus.FAILED, end=T0 + 30).end == T0 + 30
    with pytest.raises(KeyError):
        store.finish_run("nope", RunStatus.FINISHED)
    with pytest.raises(ValueError, match="status"):
        store.finish_run("r1", "exploded")


def test_events_filtered_and_the_newest_kept_by_the_limit(store: Store) -> None:
    events = [
        Event(T0 + i, "log" if i % 2 else "checkpoint", f"e{i}", {"run": f"r{i % 3}"}, {"i": i})
        for i in range(10)
    ]
    key = SeriesKey.of("loss", {})
    store.apply([batch([key], [], [], [], seq=1, events=events[5:])])
    store.apply([batch([key], [], [], [], seq=2, events=events[:5])])
    assert store.events() == events
    assert store.events(run="r1") == [e for e in events if e.labels["run"] == "r1"]
    assert store.events(kind="checkpoint", start=T0 + 2, end=T0 + 6) == events[2:7:2]
    assert store.events(limit=3) == events[7:]
    assert store.events(run="r9") == []
