"""The live detector: time order across batches, hot reload keeping state, silences and
inhibition, what it records and whom it tells."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from stepwatch.detect import (
    DETECTORS,
    Inhibition,
    LiveAlert,
    LiveDetector,
    Matcher,
    Recovery,
    RuleFiles,
    Silence,
    SilenceBook,
    parse_rules,
)
from stepwatch.detect.live._reorder import ReorderBuffer, SeriesOrder, merge
from stepwatch.model import NO_STEP, Event, SampleBatch, SeriesKey
from stepwatch.store import Position

#: A rule file of one rule, ``hot``, which both rule files below start with.
HOT = """\
groups:
  - name: g
    rules:
      - alert: hot
        signal: {metric: gpu.temp_c, by: [node]}
        threshold: "> 80"
        for: 30s
"""

RULES = (
    HOT
    + """\
      - alert: very_hot
        signal: {metric: gpu.temp_c, by: [node]}
        threshold: "> 90"
        for: 30s
      - alert: nan_loss
        kind: nonfinite
        signal: {metric: loss, by: [run]}
        detector: nonfinite
"""
)

ABSENCE = """\
groups:
  - name: g
    rules:
      - alert: node_down
        signal: {metric: host.cpu_pct, by: [node]}
        detector: {type: absence, timeout_s: 10}
"""


def _batch(name: str, labels: dict[str, str], ts: list[float], values: list[float]) -> SampleBatch:
    n = len(ts)
    return SampleBatch(
        "test",
        0,
        [SeriesKey.of(name, labels)],
        np.zeros(n, np.uint32),
        np.array(ts, np.float64),
        np.full(n, NO_STEP, np.int64),
        np.array(values, np.float64),
    )


def _temps(node: str, start: float, stop: float, value: float) -> SampleBatch:
    ts = list(np.arange(start, stop, 1.0))
    return _batch("gpu.temp_c", {"run": "r", "node": node}, ts, [value] * len(ts))


class Recorder:
    """Stands in for the store: keeps what the detector records."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, events: object) -> None:
        self.events.extend(events)  # type: ignore[call-overload]

    def alerts(self, rule: str | None = None) -> list[LiveAlert]:
        found = [LiveAlert.from_event(e) for e in self.events if e.kind == "alert"]
        return [a for a in found if rule is None or a.rule == rule]

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def rule_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES)
    return path


def _live(
    started: list[LiveDetector], files: RuleFiles, recorder: Recorder, **kw: object
) -> LiveDetector:
    live = LiveDetector(files, recorder, **kw).start()  # type: ignore[arg-type]
    started.append(live)
    return live


# ---- time order ---------------------------------------------------------------------------


def test_reorder_buffer_releases_in_time_order_after_the_lateness_window() -> None:
    buffer = ReorderBuffer(lateness_s=2.0)
    a = _batch("m", {"node": "a"}, [1.0, 3.0, 5.0], [1, 3, 5])
    b = _batch("m", {"node": "b"}, [0.5, 2.0, 4.0, 6.0], [0.5, 2, 4, 6])
    buffer.add(a, np.arange(3))
    buffer.add(b, np.arange(4))
    out = buffer.release()
    assert out is not None
    assert out.ts.tolist() == [0.5, 1.0, 2.0, 3.0, 4.0]  # newest 6 minus 2 s: up to 4 go out
    assert out.value.tolist() == [0.5, 1, 2, 3, 4]
    assert [out.keys[i].label("node") for i in out.series.tolist()] == ["b", "a", "b", "a", "b"]
    rest = buffer.release(force=True)
    assert rest is not None and rest.ts.tolist() == [5.0, 6.0]


def test_a_late_sample_is_processed_at_the_frontier_not_dropped() -> None:
    buffer = ReorderBuffer(lateness_s=1.0)
    buffer.add(_batch("m", {"node": "a"}, [10.0, 20.0], [1, 2]), np.arange(2))
    first = buffer.release()
    assert first is not None and first.ts.tolist() == [10.0]
    buffer.add(_batch("m", {"node": "b"}, [5.0], [7.0]), np.arange(1))
    late = buffer.release(force=True)
    assert late is not None
    assert late.ts.tolist() == [10.0, 20.0]  # the sample of t=5 counts, at the frontier (10)
    assert sorted(late.value.tolist()) == [2.0, 7.0]
    assert buffer.late == 1


def test_series_order_raises_a_sample_that_goes_back_in_its_series() -> None:
    order = SeriesOrder()
    order(_batch("m", {"node": "a"}, [10.0, 11.0], [1, 2]))
    again = order(_batch("m", {"node": "a"}, [5.0, 12.0], [3, 4]))
    assert again.ts.tolist() == [11.0, 12.0]
    assert again.value.tolist() == [3.0, 4.0]
    assert order.late == 1
    other = order(_batch("m", {"node": "b"}, [5.0], [1]))  # another series has its own time
    assert other.ts.tolist() == [5.0]


def test_series_order_drops_exact_copies_of_samples_already_taken() -> None:
    order = SeriesOrder()
    first = order(_batch("m", {"node": "a"}, [10.0, 10.0, 11.0, 11.0], [1, 1, 2, 5]))
    assert list(zip(first.ts.tolist(), first.value.tolist(), strict=True)) == [
        (10.0, 1.0),
        (11.0, 2.0),
        (11.0, 5.0),  # the same time, another value: a sample of its own
    ]
    again = order(_batch("m", {"node": "a"}, [11.0, 10.0, 12.0, 12.0], [2, 1, 3, 3]))
    assert list(zip(again.ts.tolist(), again.value.tolist(), strict=True)) == [(12.0, 3.0)]
    assert (order.copies, order.late) == (4, 0)
    nan = order(_batch("m", {"node": "a"}, [13.0, 13.0], [math.nan, math.nan]))
    assert nan.ts.tolist() == [13.0] and order.copies == 5


def test_a_copy_from_beyond_the_horizon_counts_as_a_late_sample() -> None:
    order = SeriesOrder(horizon_s=60.0)
    order(_batch("m", {"node": "a"}, [0.0], [1]))
    order(_batch("m", {"node": "b"}, [100.0], [1]))  # data time moves on, past the horizon
    order(_batch("m", {"node": "a"}, [101.0], [2]))
    late = order(_batch("m", {"node": "a"}, [0.0], [1]))
    assert late.ts.tolist() == [101.0] and (order.copies, order.late) == (0, 1)


def test_merged_batches_keep_each_series_in_arrival_order() -> None:
    first = _batch("m", {"node": "a"}, [1.0, 2.0], [1, 2])
    first.events.append(Event(1.5, "log", "x"))
    second = SampleBatch(
        "other",
        0,
        [SeriesKey.of("m", {"node": "b"}), SeriesKey.of("m", {"node": "a"})],
        np.array([1, 0, 1], np.uint32),
        np.array([3.0, 0.5, 4.0]),
        np.full(3, NO_STEP, np.int64),
        np.array([3.0, 0.5, 4.0]),
    )
    out = merge([first, second])
    nodes = [out.keys[i].label("node") for i in out.series.tolist()]
    assert list(zip(nodes, out.value.tolist(), strict=True)) == [
        ("a", 1.0),
        ("a", 2.0),
        ("a", 3.0),
        ("b", 0.5),
        ("a", 4.0),
    ]
    assert len(out.keys) == 2 and [e.text for e in out.events] == ["x"]


def test_a_nan_sent_late_still_fires(started: list[LiveDetector], recorder: Recorder) -> None:
    live = _live(started, RuleFiles(base=parse_rules(RULES, "r.yaml", DETECTORS)), recorder)
    live.feed([_batch("loss", {"run": "r"}, [10.0, 11.0, 12.0], [1.0, 1.0, 1.0])])
    live.feed([_batch("loss", {"run": "r"}, [5.0], [math.nan])])
    live.flush()
    (alert,) = recorder.alerts("nan_loss")
    assert alert.state == "firing" and alert.ts == 12.0
    assert live.stats.late == 1 and live.stats.errors == 0


def test_members_arriving_out_of_order_reach_the_absence_rule_in_time_order(
    started: list[LiveDetector], recorder: Recorder
) -> None:
    live = _live(started, RuleFiles(base=parse_rules(ABSENCE, "a.yaml", DETECTORS)), recorder)

    def cpu(node: str, start: float, stop: float, pct: float = 50.0) -> SampleBatch:
        ts = list(np.arange(start, stop, 1.0))
        return _batch("host.cpu_pct", {"run": "r", "node": node}, ts, [pct] * len(ts))

    for t in range(30):  # n1's samples arrive a second behind n0's: within the lateness window
        live.feed([cpu("n0", t, t + 1)])
        if t:
            live.feed([cpu("n1", t - 1, t)])
    live.feed([cpu("n0", 30, 60)])  # n1 is silent from t=29 on
    live.flush()
    assert live.stats.errors == 0 and live.stats.late == 0
    (down,) = recorder.alerts("node_down")
    assert down.labels == {"run": "r", "node": "n1"} and down.state == "firing"
    assert (down.since, down.ts) == (28.0, 39.0)
    live.feed([cpu("n1", 20, 25, 40.0)])  # late samples far behind: they count at the frontier
    live.flush()
    assert live.stats.late == 5
    assert [a.state for a in recorder.alerts("node_down")] == ["firing", "resolved"]


# ---- reload -------------------------------------------------------------------------------


def test_reload_keeps_unchanged_rules_and_restarts_changed_ones(
    started: list[LiveDetector], recorder: Recorder, rule_file: Path
) -> None:
    live = _live(started, RuleFiles([rule_file]), recorder)
    live.feed([_temps("n0", 0, 20, 95.0)])  # both rules pending since t=0
    live.flush()
    rule_file.write_text(RULES.replace('"> 90"', '">= 90"'))  # very_hot changes; hot does not
    outcome = live.reload()
    assert outcome.error is None and (outcome.rules, outcome.kept) == (3, 2)
    live.feed([_temps("n0", 20, 45, 95.0)])
    live.flush()
    (hot,) = recorder.alerts("hot")
    assert (hot.state, hot.since, hot.ts) == ("firing", 0.0, 30.0)  # its 20 s pending counted
    assert recorder.alerts("very_hot") == []  # restarted at t=20: fires only at t=50
    live.feed([_temps("n0", 45, 55, 95.0)])
    live.flush()
    (very_hot,) = recorder.alerts("very_hot")
    assert (very_hot.since, very_hot.ts) == (20.0, 50.0)


def test_a_removed_rule_resolves_its_firing_alerts(
    started: list[LiveDetector], recorder: Recorder, rule_file: Path
) -> None:
    live = _live(started, RuleFiles([rule_file]), recorder)
    live.feed([_temps("n0", 0, 40, 95.0)])
    live.flush()
    assert [a.state for a in recorder.alerts("hot")] == ["firing"]
    rule_file.write_text(RULES.replace("alert: hot\n", "alert: warm\n"))
    live.reload()
    firing, resolved = recorder.alerts("hot")
    assert resolved.state == "resolved" and resolved.id == firing.id
    assert resolved.reason == "rule changed"
    assert [a.rule for a in live.open_alerts()] == ["very_hot"]


def test_a_changed_rule_that_was_firing_fires_afresh(
    started: list[LiveDetector], recorder: Recorder, rule_file: Path
) -> None:
    live = _live(started, RuleFiles([rule_file]), recorder)
    live.feed([_temps("n0", 0, 40, 95.0)])
    live.flush()
    rule_file.write_text(RULES.replace('"> 80"', '"> 85"'))
    live.reload()
    live.feed([_temps("n0", 40, 80, 95.0)])
    live.flush()
    hot = recorder.alerts("hot")
    assert [(a.state, a.since, a.ts) for a in hot] == [
        ("firing", 0.0, 30.0),
        ("resolved", 0.0, 39.0),
        ("firing", 40.0, 70.0),
    ]


TWO_FOR_ONE = (
    HOT
    + """\
      - alert: warm_for_long
        kind: hot
        signal: {metric: gpu.temp_c, by: [node]}
        threshold: "> 70"
        for: 35s
"""
)


def test_an_alert_another_rule_still_holds_stays_open_when_its_rule_goes(
    started: list[LiveDetector], recorder: Recorder, rule_file: Path
) -> None:
    rule_file.write_text(TWO_FOR_ONE)
    live = _live(started, RuleFiles([rule_file]), recorder)
    live.feed([_temps("n0", 0, 40, 95.0)])  # hot opens the alert at 30, warm_for_long joins at 35
    live.flush()
    (opened,) = recorder.alerts()
    assert (opened.rule, opened.ts) == ("hot", 30.0)
    rule_file.write_text(TWO_FOR_ONE.replace("alert: hot\n", "alert: gone\n        kind: x\n"))
    live.reload()
    assert len(recorder.alerts()) == 1  # warm_for_long still fires: the alert stays open
    live.feed([_temps("n0", 40, 45, 50.0)])
    live.flush()
    closed = recorder.alerts()[1]
    assert (closed.id, closed.state, closed.ts) == (opened.id, "resolved", 40.0)


def test_a_bad_rule_file_keeps_the_old_rules_running(
    started: list[LiveDetector], recorder: Recorder, rule_file: Path
) -> None:
    live = _live(started, RuleFiles([rule_file]), recorder)
    rule_file.write_text(RULES.replace('threshold: "> 80"', 'threshold: "hotter than 80"'))
    outcome = live.reload()
    assert outcome.error is not None and "rules.yaml:" in outcome.error
    assert recorder.kinds() == ["rules_error"]
    live.feed([_temps("n0", 0, 40, 95.0)])
    live.flush()
    assert [a.state for a in recorder.alerts("hot")] == ["firing"]


def test_a_changed_file_is_picked_up_without_being_asked(
    started: list[LiveDetector], recorder: Recorder, rule_file: Path
) -> None:
    _live(started, RuleFiles([rule_file]), recorder, watch_interval_s=0.05)
    rule_file.write_text(RULES + "      - alert: extra\n        signal: {log: {any: [x]}}\n")
    deadline = time.monotonic() + 30
    while "rules_loaded" not in recorder.kinds() and time.monotonic() < deadline:
        time.sleep(0.02)
    (loaded,) = [e for e in recorder.events if e.kind == "rules_loaded"]
    assert loaded.data == {"rules": 4, "kept": 3}


# ---- silences, inhibition, subscribers ----------------------------------------------------


def test_silenced_alerts_are_recorded_but_not_notified(
    started: list[LiveDetector], recorder: Recorder
) -> None:
    book = SilenceBook()
    book.add(Silence((Matcher.parse("node=n1"),), 0, time.time() + 3600))
    rules = RuleFiles(base=parse_rules(RULES, "r.yaml", DETECTORS))
    live = _live(started, rules, recorder, silences=book)
    told: list[LiveAlert] = []
    everything: list[LiveAlert] = []
    live.subscribe(told.append)
    live.subscribe(everything.append, muted=True)
    live.feed([_temps("n0", 0, 40, 85.0), _temps("n1", 0, 40, 85.0)])
    live.flush()
    by_node = {a.labels["node"]: a for a in recorder.alerts("hot")}
    assert by_node["n1"].silenced and not by_node["n0"].silenced
    assert [(a.rule, a.labels["node"]) for a in told] == [("hot", "n0")]
    assert sorted(a.labels["node"] for a in everything) == ["n0", "n1"]


def test_inhibition_mutes_a_kind_while_its_source_fires(
    started: list[LiveDetector], recorder: Recorder
) -> None:
    inhibit = (Inhibition("very_hot", frozenset({"hot"}), ("node",)),)
    slower_hot = RULES.replace("for: 30s", "for: 35s", 1)  # very_hot fires first
    rules = RuleFiles(base=parse_rules(slower_hot, "r.yaml", DETECTORS))
    live = _live(started, rules, recorder, inhibitions=inhibit)
    live.feed([_temps("n0", 0, 40, 95.0), _temps("n1", 0, 40, 85.0)])
    live.flush()
    by_key = {(a.rule, a.labels["node"]): a for a in recorder.alerts()}
    assert by_key["hot", "n0"].inhibited and not by_key["very_hot", "n0"].inhibited
    assert not by_key["hot", "n1"].inhibited  # n1 is not very hot


def test_a_batch_the_engine_fails_on_is_counted_and_detection_goes_on(
    started: list[LiveDetector], recorder: Recorder
) -> None:
    peers = RULES + (
        "      - alert: slow_rank\n"
        "        signal: {metric: train.compute_time_s, by: [rank]}\n"
        "        detector: peers\n"
    )
    live = _live(started, RuleFiles(base=parse_rules(peers, "r.yaml", DETECTORS)), recorder)
    with_steps = _batch("train.compute_time_s", {"run": "r", "rank": "0"}, [1.0], [0.3])
    with_steps.step[:] = 1
    live.feed([with_steps])
    live.flush()
    live.feed([_batch("train.compute_time_s", {"run": "r", "rank": "1"}, [2.0], [0.3])])
    live.flush()  # the peers detector refuses samples without steps after some with
    assert live.stats.errors == 1
    live.feed([_temps("n0", 0, 40, 95.0)])
    live.flush()
    assert [a.state for a in recorder.alerts("hot")] == ["firing"]


def test_a_full_queue_skips_detection_and_counts_it(recorder: Recorder) -> None:
    rules = RuleFiles(base=parse_rules(RULES, "r.yaml", DETECTORS))
    live = LiveDetector(rules, recorder, max_queued_samples=15)
    live.feed([_temps("n0", 0, 10, 95.0)])
    live.feed([_temps("n0", 10, 20, 95.0)])
    assert live.stats.dropped == 10
    live.start()
    live.flush()
    live.stop()
    assert live.stats.samples == 10


def test_alerts_left_firing_by_a_previous_life_stay_firing_and_data_resolves_them(
    recorder: Recorder,
) -> None:
    rules = RuleFiles(base=parse_rules(RULES, "r.yaml", DETECTORS))
    first = LiveDetector(rules, recorder).start()
    first.feed([_temps("n0", 0, 40, 95.0)])
    first.stop()
    left = {a.id: a for a in recorder.alerts() if a.state == "firing"}
    assert {a.rule for a in left.values()} == {"hot", "very_hot"}
    second = LiveDetector(rules, recorder)  # no checkpoint: it starts cold, and adopts them
    second.recover(Recovery.of((), Position(), left))
    second.start()
    second.feed([_temps("n0", 100, 140, 95.0)])  # the same condition, seen afresh
    second.flush()
    assert len(recorder.alerts()) == len(left)  # continued, neither resolved nor fired again
    assert {a.id for a in second.open_alerts()} == set(left)
    second.feed([_temps("n0", 140, 150, 20.0)])
    second.stop()
    resolved = recorder.alerts()[len(left) :]
    assert {(a.id, a.state) for a in resolved} == {(i, "resolved") for i in left}


# ---- warming up ---------------------------------------------------------------------------

WARMING = """\
groups:
  - name: g
    rules:
      - alert: spike
        signal: {metric: loss, by: [run]}
        detector: {type: robust_z, warmup: 10}
      - alert: hot
        signal: {metric: loss, by: [run]}
        threshold: "> 80"
"""


def test_rules_whose_detectors_have_no_baseline_yet_say_how_far_they_are(
    started: list[LiveDetector], recorder: Recorder, tmp_path: Path
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(WARMING)
    live = _live(started, RuleFiles([path]), recorder)
    assert live.warming_up() == []  # nothing seen: nothing to judge yet
    live.feed([_batch("loss", {"run": "r"}, [1.0, 2.0, 3.0, 4.0], [2.0, 2.1, 1.9, 2.0])])
    live.flush()
    (spike,) = live.warming_up()  # a threshold needs no baseline
    assert (spike["rule"], spike["labels"], spike["seen"], spike["needed"]) == (
        "spike",
        {"run": "r"},
        4,
        10,
    )
    assert spike["text"] == "warming up, 4 of 10 samples"
    live.feed([_batch("loss", {"run": "r"}, [5.0 + i for i in range(6)], [2.0] * 6)])
    live.flush()
    assert live.warming_up() == []
