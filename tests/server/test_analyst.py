"""The analyst worker over a real store and a real chat-completions server, one pass at a time
on a clock the test moves: a firing incident is analysed once with its context, a failed try
is retried later a few times and then given up, a person's ask is answered for any incident,
and nothing is ever requested or run."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from _chat_model import chat_model

from stepwatch.act import AnalystConfig, Playbooks, parse_playbooks
from stepwatch.detect import AlertIncident
from stepwatch.model import NO_STEP, Event, RecordBatch, SampleBatch, SeriesKey
from stepwatch.server._analyst import MAX_ASKED, MAX_TRIES, RETRY_AFTER_S, Analyst, find_incident
from stepwatch.store import AlertRow, Store

T0 = 1_780_000_000.0
KEY = "sk-never-shown-77"
PLAYBOOKS = """\
playbooks:
  - name: cordon
    kind: command
    argv: [echo, "{node}"]
    description: take the node out of the pool
"""


class Clock:
    now = T0 + 60

    def __call__(self) -> float:
        return self.now


def _alert(aid: str, kind: str, state: str, since: float, run: str = "r1") -> Event:
    labels = {"run": run, "node": "n0"}
    data = {"id": aid, "rule": kind, "kind": kind, "state": state, "severity": "critical",
            "since": since, "value": 1.0, "annotations": {"summary": f"{kind} on n0"}}  # fmt: skip
    return Event(since, "alert", kind, labels, data)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """Run r1: an OOM log line, its loss going NaN, the OOM alert still firing; run r2: an
    incident over."""
    opened = Store(tmp_path / "store.duckdb")
    key = SeriesKey.of("loss", {"run": "r1"})
    ts = T0 - 300 + np.arange(310, dtype=np.float64)
    values = np.where(ts < T0 + 5, 2.0, np.nan)
    oom = Event(T0 - 1, "log", "RuntimeError: CUDA out of memory", {"run": "r1", "node": "n0"})
    samples = SampleBatch(
        "trainer", 1, [key], np.zeros(len(ts), np.uint32), ts,
        np.arange(len(ts), dtype=np.int64), values, [oom],
    )  # fmt: skip
    assert NO_STEP not in samples.step
    records = [
        _alert("oom1", "log_oom", "firing", T0),
        _alert("nan1", "nonfinite", "firing", T0 + 5),
        _alert("nan1", "nonfinite", "resolved", T0 + 5),
        _alert("old1", "loss_spike", "firing", T0 - 9000, run="r2"),
        _alert("old1", "loss_spike", "resolved", T0 - 8000, run="r2"),
    ]
    opened.apply([samples, RecordBatch.of("stepwatch.collector", records)])
    yield opened
    opened.close()


def _analyst(store: Store, url: str, clock: Clock, behind: bool = False) -> Analyst:
    config = AnalystConfig(url, "test-model", KEY, timeout_s=5)
    playbooks: Playbooks = parse_playbooks(PLAYBOOKS, "playbooks.yaml")
    return Analyst(store, config, playbooks, clock=clock, behind=lambda: behind)


def test_a_firing_incident_is_analysed_once_with_its_context(store: Store) -> None:
    with chat_model("An OOM on n0, then NaN.\nPLAYBOOK: cordon, wipe-disks") as model:
        analyst = _analyst(store, model.url, Clock())
        assert analyst.tick() == 0  # seen: asked once the next pass sees it unchanged
        assert analyst.tick() == 1
        assert analyst.tick() == 0  # done: never asked again by itself
    (asked,) = model.asked
    said = asked.prompt
    for part in (
        "log_oom",
        "nonfinite",
        "may explain nonfinite",
        "CUDA out of memory",
        "loss (1 series): before 2 … 2",
        "cordon: take the node out of the pool",
    ):
        assert part in said, part
    assert "loss_spike" not in said  # another run's incident
    kept = store.analyses.get("oom1")
    assert kept is not None and kept.done and kept.run == "r1" and kept.tries == 1
    assert kept.as_json() == {
        "by": "model",
        "model": "test-model",
        "text": "An OOM on n0, then NaN.\nPLAYBOOK: cordon, wipe-disks",
        "at": T0 + 60,
        "suggested_playbooks": ["cordon"],
    }
    assert store.current.actions().items == [] and store.current.commands() == []
    assert analyst.outcomes == {"ok": 1}


def test_a_failed_try_is_retried_later_a_few_times_then_given_up(store: Store) -> None:
    clock = Clock()
    with chat_model(answers=[(500, b"{}")] * (MAX_TRIES + 1)) as model:
        analyst = _analyst(store, model.url, clock)
        tried = []
        for step in (0, 0, 0, RETRY_AFTER_S, 0, 2 * RETRY_AFTER_S - 1, 1, 0, 1e6, 0):
            clock.now += step
            analyst.tick()
            tried.append(len(model.asked))
    assert tried == [0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    kept = store.analyses.get("oom1")
    assert kept is not None and not kept.done and kept.tries == MAX_TRIES
    assert "HTTP 500" in kept.error and KEY not in kept.error
    assert analyst.outcomes == {"http_error": MAX_TRIES}


def _found(store: Store, incident_id: str) -> AlertIncident[AlertRow]:
    found = find_incident(store, incident_id)
    assert found is not None
    return found


def test_a_person_s_ask_is_answered_for_any_incident(store: Store) -> None:
    with chat_model("A spike.") as model:
        analyst = _analyst(store, model.url, Clock())
        analyst.tick()
        analyst.tick()  # the firing one
        assert analyst.ask(_found(store, "old1")) and analyst.asked("old1")
        assert analyst.tick() == 1
        assert not analyst.asked("old1")
        assert analyst.ask(_found(store, "oom1"))  # again, though it has its analysis
        assert analyst.tick() == 1
    assert len(model.asked) == 3 and "loss_spike" in model.asked[1].prompt
    assert store.analyses.get("old1").done  # type: ignore[union-attr]
    assert store.analyses.get("oom1").tries == 2  # type: ignore[union-attr]


def test_asks_wait_within_their_bound(store: Store) -> None:
    analyst = _analyst(store, "http://127.0.0.1:9/v1", Clock())
    first = _found(store, "oom1").alerts[0]
    asks = [AlertIncident(first.run, [replace(first, id=f"id{i}")]) for i in range(MAX_ASKED + 1)]
    assert all(analyst.ask(incident) for incident in asks[:-1])
    assert analyst.ask(asks[0]) and not analyst.ask(asks[-1])


def test_a_pass_waits_while_ingest_is_behind(store: Store) -> None:
    with chat_model() as model:
        assert _analyst(store, model.url, Clock(), behind=True).tick() == 0
    assert model.asked == [] and store.analyses.get("oom1") is None


def test_an_incident_is_found_by_its_first_alert_only(store: Store) -> None:
    found = find_incident(store, "oom1")
    assert found is not None and [a.id for a in found.alerts] == ["oom1", "nan1"]
    assert find_incident(store, "nan1") is None and find_incident(store, "nope") is None
