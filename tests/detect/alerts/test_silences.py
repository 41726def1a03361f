"""Silences match labels for a window; inhibition mutes a node's symptoms while it is down."""

from __future__ import annotations

import threading

import pytest

from stepwatch.detect.alerts._silences import (
    WAITING_S,
    Inhibition,
    Matcher,
    RecentlyResolved,
    Silence,
    inhibited,
)

ALERT = {"kind": "gpu_thermal", "node": "node3", "gpu": "6", "run": "r1"}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("node=node3", True),
        ("node = 'node3'", True),
        ("node!=node3", False),
        ("kind=~gpu_.*", True),
        ("kind!~gpu_.*", False),
        ("gpu=~[0-3]", False),
        ("rank=", True),  # an absent label is the empty string, as in Alertmanager
        ("rank!=", False),
    ],
)
def test_matchers(text: str, matches: bool) -> None:
    assert Matcher.parse(text).matches(ALERT) is matches


@pytest.mark.parametrize("text", ["node", "=x", "no de=x", "node=~("])
def test_a_bad_matcher_is_a_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="expected LABEL=VALUE|bad regular expression|operator"):
        Matcher.parse(text)


def test_a_silence_mutes_matching_alerts_only_while_it_lasts() -> None:
    silence = Silence((Matcher.parse("node=node3"), Matcher.parse("kind=~gpu_.*")), 100.0, 200.0)
    assert silence.mutes(ALERT, 150.0)
    assert not silence.mutes(ALERT, 99.0) and not silence.mutes(ALERT, 200.0)
    assert not silence.mutes({**ALERT, "node": "node4"}, 150.0)
    with pytest.raises(ValueError, match="end after"):
        Silence((Matcher.parse("a=b"),), 10.0, 10.0)
    with pytest.raises(ValueError, match="at least one matcher"):
        Silence((), 10.0, 20.0)


def test_node_down_inhibits_that_nodes_stragglers_but_not_others() -> None:
    down = [("node_down", {"node": "node2"})]
    assert inhibited("straggler", {"node": "node2", "rank": "17"}, down)
    assert inhibited("sync_latency", {"node": "node2"}, down)
    assert not inhibited("straggler", {"node": "node1", "rank": "9"}, down)
    assert not inhibited("gpu_thermal", {"node": "node2", "gpu": "1"}, down)
    assert not inhibited("straggler", {"rank": "17"}, down)  # no node: nothing to compare
    custom = [Inhibition("disk_full", frozenset({"checkpoint_slow"}), ("node",))]
    assert inhibited("checkpoint_slow", {"node": "n"}, [("disk_full", {"node": "n"})], custom)


def test_a_resolved_cause_explains_its_waiting_symptoms_while_their_windows_hold_it() -> None:
    recent = RecentlyResolved()
    recent.add("dataloader_bottleneck", {"run": "r", "node": "node3"}, 1000.0)
    recent.add("gpu_thermal", {"run": "r", "node": "node3"}, 1000.0)  # inhibits nothing: not kept
    idle = {"run": "r", "node": "node1", "gpu": "2"}

    def muted(kind: str, at: float, labels: dict[str, str] = idle) -> bool:
        return inhibited(kind, labels, [], resolved=recent.at(at), at=at)

    assert muted("gpu_underutilized", 1000.0 + WAITING_S)  # its window still holds the cause
    assert not muted("gpu_underutilized", 1001.0 + WAITING_S)
    assert recent.entries == {}  # forgotten once it can explain nothing: bounded
    recent.add("dataloader_bottleneck", {"run": "r", "node": "node3"}, 1000.0)
    assert not muted("gpu_underutilized", 1100.0, {**idle, "run": "other"})  # another run's
    assert muted("sync_latency", 1100.0, {"run": "r", "node": "node1"})
    recent.add("node_down", {"run": "r", "node": "node1"}, 1000.0)  # explains only while down
    assert not muted("telemetry_gap", 1001.0, {"run": "r", "node": "node1", "producer": "agent"})
    recent.discard("dataloader_bottleneck", {"run": "r", "node": "node3"})  # firing again
    assert not muted("gpu_underutilized", 1100.0)


def test_a_catastrophic_pattern_matches_a_long_value_at_once() -> None:
    """``(a+)+$`` backtracks exponentially in Python's ``re``; RE2 answers in linear time."""
    matcher = Matcher.parse("node=~(a+)+$")
    found: list[bool] = []
    worker = threading.Thread(
        target=lambda: found.append(matcher.matches({"node": "a" * 64 + "!"}))
    )
    worker.start()
    worker.join(timeout=30)
    assert found == [False]
    assert Matcher.parse("node=~(a+)+$").matches({"node": "a" * 64})


@pytest.mark.parametrize(
    ("pattern", "why"),
    [(r"(a)\1", "no backreferences"), ("(?=a)", "no lookarounds"), ("a" * 1001, "longer than")],
)
def test_patterns_only_backtracking_can_run_are_refused(pattern: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Matcher.parse(f"node=~{pattern}")


@pytest.mark.parametrize(
    ("fault", "forecast", "labels"),
    [
        ("gpu_memory_pressure", "forecast_oom", {"run": "r", "node": "n1", "gpu": "3"}),
        ("gpu_thermal", "forecast_thermal", {"run": "r", "node": "n1", "gpu": "3"}),
        ("host_memory_leak", "forecast_host_oom", {"run": "r", "node": "n1"}),
        ("disk_full", "forecast_disk_full", {"run": "r", "node": "n1"}),
    ],
)
def test_a_fault_that_fires_mutes_its_own_forecast_only(
    fault: str, forecast: str, labels: dict[str, str]
) -> None:
    assert inhibited(forecast, labels, [(fault, labels)])
    elsewhere = {**labels, "node": "n2"}
    assert not inhibited(forecast, elsewhere, [(fault, labels)])
    assert not inhibited(forecast, labels, [("node_down", labels)])
