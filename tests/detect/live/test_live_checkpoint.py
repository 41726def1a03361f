"""The live detector's state through a checkpoint: a restored detector goes on exactly as one
that never stopped, a rule file changed between lives applies, a checkpoint it cannot read
starts it cold without harm, and the replay at start tells only what the store lacks."""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from stepwatch._durable import restore_parts
from stepwatch.detect import (
    DETECTORS,
    LiveAlert,
    LiveDetector,
    Recovery,
    RuleFiles,
    builtin_rules,
    parse_rules,
)
from stepwatch.detect.live import _live_state
from stepwatch.model import NO_STEP, Event, SampleBatch, SeriesKey
from stepwatch.store import Checkpoint, Position

from .test_live import RULES, Recorder, _temps

T0 = 1_780_000_000.0
RANKS = 4


def _training(start: int, stop: int, spike_at: int | None = None) -> list[SampleBatch]:
    """Batches of one second each from four ranks on two nodes: loss, step time, GPU heat,
    host CPU; the loss of rank 0 jumps at ``spike_at``; an out-of-memory line at the spike."""
    rng = np.random.default_rng(start)
    out = []
    for t in range(start, stop):
        keys, values, steps = [], [], []
        for rank in range(RANKS):
            node = f"n{rank // 2}"
            labels = {"run": "r", "node": node, "rank": str(rank), "gpu": str(rank % 2)}
            loss = 2.0 * np.exp(-t / 2000) + rng.normal(0, 0.01)
            loss *= 3.0 if spike_at is not None and spike_at <= t < spike_at + 5 else 1.0
            for name, value, step in (
                ("train.loss", loss, t),
                ("train.step_time_s", 0.5 + rng.normal(0, 0.01), t),
                ("gpu.temp_c", 60.0 + rng.normal(0, 0.5), NO_STEP),
                ("host.cpu_pct", 30.0 + rng.normal(0, 1.0), NO_STEP),
            ):
                keys.append(SeriesKey.of(name, labels))
                values.append(value)
                steps.append(step)
        n = len(keys)
        events = []
        if t == spike_at:
            events = [Event(T0 + t, "log", "CUDA out of memory", {"run": "r", "node": "n0"})]
        batch = SampleBatch(
            "trainer",
            t,
            keys,
            np.arange(n, dtype=np.uint32),
            np.full(n, T0 + t),
            np.array(steps, np.int64),
            np.array(values),
            events,
        )
        out.append(batch)
    return out


def _clock() -> float:
    return 0.0  # held samples go out by data time alone (and flush), never by a wall clock


def _run(
    started: list[LiveDetector], live: LiveDetector, batches: list[SampleBatch]
) -> LiveDetector:
    if live not in started:
        started.append(live.start())
    for i, batch in enumerate(batches):
        live.feed([batch], Position(batch.seq + 1, 0))
        if i % 10 == 9:
            live.flush()
    live.flush()
    return live


def _transitions(recorder: Recorder) -> list[tuple[str, str, str]]:
    return [(a.id, a.kind, a.state) for a in recorder.alerts()]


def test_a_restored_detector_goes_on_as_one_that_never_stopped(
    started: list[LiveDetector],
) -> None:
    rules = RuleFiles(base=builtin_rules())
    before, after = _training(0, 300), _training(300, 400, spike_at=350)
    whole = Recorder()
    unbroken = _run(started, LiveDetector(rules, whole, monotonic=_clock), before + after)
    first_life = Recorder()
    first = _run(started, LiveDetector(rules, first_life, monotonic=_clock), before)
    blob = first.snapshot()
    assert first.snapshot_position == Position(300, 0)
    second_life = Recorder()
    second = LiveDetector(rules, second_life, monotonic=_clock)
    second.restore(blob)
    second.recover(Recovery.of((), Position(300, 0), {}))
    _run(started, second, after)
    assert second.warming_up() == unbroken.warming_up()  # every baseline came back
    kinds = {kind for _, kind, state in _transitions(second_life) if state == "firing"}
    assert {"loss_spike", "log_oom"} <= kinds
    assert _transitions(first_life) + _transitions(second_life) == _transitions(whole)


def test_a_checkpoint_of_rules_with_a_policies_section_is_read_back(
    started: list[LiveDetector], tmp_path: Path
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(
        "policies:\n  rules:\n"
        "    - {name: spike, kinds: [loss_spike], steps: [{action: checkpoint}]}\n"
    )
    rules = RuleFiles([path], base=builtin_rules())
    first = _run(started, LiveDetector(rules, Recorder(), monotonic=_clock), _training(0, 300))
    second = LiveDetector(rules, Recorder(), monotonic=_clock)
    second.restore(first.snapshot())  # the policies are act's classes: read back all the same
    started.append(second.start())
    assert second.warming_up() == first.warming_up()


def test_a_rule_changed_between_lives_restarts_and_the_others_keep_their_alerts(
    started: list[LiveDetector], tmp_path: Path
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES)
    recorder = Recorder()
    first = _run(started, LiveDetector(RuleFiles([path]), recorder), [_temps("n0", 0, 40, 95.0)])
    fired = {a.rule: a.id for a in recorder.alerts()}
    assert set(fired) == {"hot", "very_hot"}
    blob = first.snapshot()
    path.write_text(RULES.replace('threshold: "> 80"', 'threshold: "> 85"'))
    second = LiveDetector(RuleFiles([path]), recorder)
    second.restore(blob)
    second.recover(Recovery.of((), Position(), {a.id: a for a in recorder.alerts()}))
    _run(started, second, [_temps("n0", 40, 45, 95.0)])
    changed = recorder.alerts()[2:]
    assert [(a.id, a.state, a.reason) for a in changed] == [
        (fired["hot"], "resolved", "rule changed")
    ]
    assert [a.id for a in second.open_alerts()] == [fired["very_hot"]]  # not fired again
    _run(started, second, [_temps("n0", 45, 50, 20.0)])
    assert (recorder.alerts()[-1].id, recorder.alerts()[-1].state) == (
        fired["very_hot"],
        "resolved",
    )


class _Payload:
    """What a tampered checkpoint would hold: an object whose unpickling runs a command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


def _stamped(body: bytes, release: str = "") -> bytes:
    header, _, _ = _live_state.dumps({}, {}).partition(b"\n")
    if release:
        header = header.replace(_live_state.__version__.encode(), release.encode())
    return header + b"\n" + body


def test_a_checkpoint_it_cannot_read_starts_it_cold_and_runs_nothing(
    started: list[LiveDetector], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rules = RuleFiles(base=parse_rules(RULES, "r.yaml", DETECTORS))
    marker = tmp_path / "ran"
    good = _run(started, LiveDetector(rules, Recorder()), [_temps("n0", 0, 5, 50.0)]).snapshot()
    unreadable = {
        "not a checkpoint": b"junk",
        "another release": _stamped(good.partition(b"\n")[2], release="0.0.1"),
        "a broken pickle": _stamped(b"\x80\x05broken"),
        "a command in it": _stamped(pickle.dumps(_Payload(marker))),
        "no state in it": _stamped(pickle.dumps([1, 2])),
    }
    for why, blob in unreadable.items():
        live = LiveDetector(rules, Recorder())
        with caplog.at_level(logging.WARNING, "stepwatch.durable"):
            restored = restore_parts([live], Checkpoint({"detection": blob}, Position()))
        assert restored == set(), why
        assert "the checkpoint of detection is not readable" in caplog.text, why
        caplog.clear()
    assert not marker.exists()
    recorder = Recorder()
    cold = LiveDetector(rules, recorder)
    restore_parts([cold], Checkpoint({"detection": b"junk"}, Position()))
    _run(started, cold, [_temps("n0", 0, 40, 95.0)])
    assert {a.rule for a in recorder.alerts()} == {"hot", "very_hot"}  # it runs, cold


def test_the_replay_at_start_records_and_tells_only_what_the_store_lacks(
    started: list[LiveDetector],
) -> None:
    rules = RuleFiles(base=parse_rules(RULES, "r.yaml", DETECTORS))
    first_life = Recorder()
    first = _run(started, LiveDetector(rules, first_life), [_temps("n0", 0, 40, 95.0)])
    blob = first.snapshot()
    since = [_temps("n0", 40, 50, 20.0), _temps("n0", 50, 90, 85.0)]
    _run(started, first, since)  # then the collector is killed, its last record unwritten
    *stored, lost = first_life.alerts()
    assert [(a.rule, a.state) for a in stored[2:]] + [(lost.rule, lost.state)] == [
        ("hot", "resolved"),
        ("very_hot", "resolved"),
        ("hot", "firing"),
    ]
    second_life, told = Recorder(), []
    second = LiveDetector(rules, second_life)
    second.subscribe(told.append)
    second.restore(blob)
    second.recover(Recovery.of(since, Position(90, 0), {a.id: a for a in stored}))
    assert not second.ready
    _run(started, second, [])
    assert second.ready
    assert [(a.id, a.state) for a in second_life.alerts()] == [(lost.id, "firing")]
    assert [(a.id, a.state) for a in told] == [(lost.id, "firing")]
    second.feed([_temps("n0", 60, 70, 85.0)], Position(80, 0))  # replayed already: skipped
    second.flush()
    assert len(second_life.alerts()) == 1 and second.stats.samples == 50


def test_open_alerts_of_the_store_are_what_it_holds(started: list[LiveDetector]) -> None:
    rules = RuleFiles(base=parse_rules(RULES, "r.yaml", DETECTORS))
    recorder = Recorder()
    first = _run(started, LiveDetector(rules, recorder), [_temps("n0", 0, 40, 95.0)])
    blob = first.snapshot()
    hot, very_hot = recorder.alerts()
    finished = very_hot.but(state="resolved", reason="run finished")  # written past detection
    second = LiveDetector(rules, Recorder())
    second.restore(blob)
    held: dict[str, LiveAlert] = {hot.id: hot, very_hot.id: finished}
    second.recover(Recovery.of((), Position(), held))
    _run(started, second, [])
    assert [a.id for a in second.open_alerts()] == [hot.id]
