"""Alert groups: by labels, kind and severity; the most severe group first."""

from __future__ import annotations

from dataclasses import dataclass, field

from stepwatch.detect import group_alerts


@dataclass(frozen=True)
class _Alert:
    kind: str
    severity: str
    since: float
    labels: dict[str, str] = field(default_factory=dict)


def test_a_burst_of_stragglers_is_one_group_and_the_critical_one_comes_first() -> None:
    stragglers = [
        _Alert("straggler", "warning", 10.0 + r, {"run": "r1", "rank": str(r)}) for r in range(64)
    ]
    down = _Alert("node_down", "critical", 50.0, {"run": "r1", "node": "node3"})
    other_run = _Alert("straggler", "warning", 5.0, {"run": "r2", "rank": "0"})
    groups = group_alerts([*stragglers, down, other_run], by=["kind", "run"])
    assert [(g.labels, len(g.alerts), g.severity, g.since) for g in groups] == [
        ({"kind": "node_down", "run": "r1"}, 1, "critical", 50.0),
        ({"kind": "straggler", "run": "r2"}, 1, "warning", 5.0),
        ({"kind": "straggler", "run": "r1"}, 64, "warning", 10.0),
    ]


def test_a_label_an_alert_lacks_groups_as_empty() -> None:
    alerts = [
        _Alert("disk_full", "critical", 1.0, {"node": "n1"}),
        _Alert("nonfinite", "critical", 2.0),
    ]
    groups = group_alerts(alerts, by=["node"])
    assert [g.labels for g in groups] == [{"node": "n1"}, {"node": ""}]
