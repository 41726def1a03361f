"""Incidents: a fault and its symptoms are one incident with the fault as its root cause; two
faults on two nodes are two; alerts far apart in time are two; heard one at a time (as the
notifier hears them) alerts make the same incidents, which are forgotten once over."""

from __future__ import annotations

from dataclasses import dataclass, field

from stepwatch.detect import OpenIncidents, incidents


@dataclass(frozen=True)
class Seen:
    kind: str
    since: float
    run: str | None = "r1"
    labels: dict[str, str] = field(default_factory=dict)
    severity: str = "warning"

    @property
    def ts(self) -> float:
        return self.since

    @property
    def id(self) -> str:
        return f"{self.kind}@{self.since}:{sorted(self.labels.items())}"


def _node(kind: str, since: float, node: str, **labels: str) -> Seen:
    return Seen(kind, since, labels={"run": "r1", "node": node, **labels})


def test_a_failing_gpu_and_what_it_causes_are_one_incident_caused_by_the_gpu() -> None:
    alerts = [
        Seen("step_time_regression", 130.0, labels={"run": "r1"}),
        _node("straggler", 110.0, "node2", rank="17"),
        _node("gpu_thermal", 100.0, "node2", gpu="1"),
        Seen("loss_spike", 150.0, labels={"run": "r1"}),
    ]
    (found,) = incidents(alerts)
    causes = found.causes()
    assert [c.alert.kind for c in causes] == [
        "gpu_thermal", "straggler", "step_time_regression", "loss_spike",
    ]  # fmt: skip
    assert causes[0].evidence == (
        "a hardware or storage alert",
        "the first of the incident's 4 alerts",
        "may explain loss_spike, step_time_regression, straggler",
        "on node2",
    )
    assert "began 10 s after the first" in causes[1].evidence


def test_a_deeper_alert_that_came_later_is_still_the_cause() -> None:
    """A slow step is often seen before the disk alert that explains it."""
    (found,) = incidents([_node("step_time_regression", 100.0, "node1"),
                          _node("disk_full", 160.0, "node1")])  # fmt: skip
    assert found.causes()[0].alert.kind == "disk_full"


def test_within_a_layer_the_more_severe_then_the_measured_fact_comes_first() -> None:
    busy = Seen("cpu_saturation", 100.0, labels={"run": "r1", "node": "node1"}, severity="info")
    starved = _node("dataloader_bottleneck", 130.0, "node1")
    assert incidents([busy, starved])[0].causes()[0].alert is starved
    said = Seen("log_nonfinite", 100.0, labels={"run": "r1"}, severity="critical")
    measured = Seen("nonfinite", 101.0, labels={"run": "r1"}, severity="critical")
    assert incidents([said, measured])[0].causes()[0].alert is measured
    alone = incidents([said])[0].causes()[0].alert
    assert alone is said  # without the measured alert, the log line is the fact


def test_two_faults_on_two_nodes_are_two_incidents() -> None:
    alerts = [
        _node("gpu_thermal", 100.0, "node1", gpu="0"),
        _node("disk_full", 120.0, "node3"),
        _node("straggler", 130.0, "node1", rank="3"),
        _node("checkpoint_slow", 140.0, "node3"),
    ]
    first, second = incidents(alerts)
    assert [a.kind for a in first.alerts] == ["gpu_thermal", "straggler"]
    assert [a.kind for a in second.alerts] == ["disk_full", "checkpoint_slow"]


def test_a_collective_failing_everywhere_is_one_incident_and_time_apart_is_two() -> None:
    alerts = [_node("log_nccl", 100.0 + i, f"node{i}") for i in range(4)]
    alerts += [_node("log_nccl", 2000.0, "node0")]  # half an hour later: another incident
    alerts += [Seen("gpu_thermal", 110.0, run="r2", labels={"run": "r2", "node": "node0"})]
    found = incidents(alerts)
    assert [(i.run, len(i.alerts)) for i in found] == [("r1", 4), ("r2", 1), ("r1", 1)]


def test_alerts_heard_one_at_a_time_make_the_incidents_of_the_whole_list() -> None:
    alerts = [
        _node("gpu_thermal", 100.0, "node1", gpu="0"),
        _node("disk_full", 120.0, "node3"),
        _node("straggler", 130.0, "node1", rank="3"),
        Seen("step_time_regression", 135.0, labels={"run": "r1"}),
        _node("checkpoint_slow", 140.0, "node3"),
        _node("gpu_thermal", 1000.0, "node1", gpu="0"),  # long after: an incident of its own
    ]
    heard: OpenIncidents[Seen] = OpenIncidents()
    homes = [heard.join(a, ended=False).id for a in alerts]
    assert heard.join(alerts[2], ended=True).id == homes[2]  # its end stays with it
    whole = {a.id: i.alerts[0].id for i in incidents(alerts) for a in i.alerts}
    assert homes == [whole[a.id] for a in alerts]
    assert len(set(homes)) == 3


def test_an_incident_is_forgotten_once_its_alerts_ended_and_no_alert_can_join_it() -> None:
    ended, still = _node("disk_full", 100.0, "node3"), _node("gpu_thermal", 100.0, "node1")
    heard: OpenIncidents[Seen] = OpenIncidents()
    first, second = heard.join(ended, ended=False), heard.join(still, ended=False)
    heard.join(ended, ended=True)
    heard.forget()
    assert set(heard.held) == {first.id, second.id}  # a new alert of node3 may still join
    heard.join(_node("log_nccl", 401.0, "node5"), ended=False)
    heard.forget(keep={first.id})  # a message about it still waits
    assert first.id in heard.held
    heard.forget()
    assert second.id in heard.held and first.id not in heard.held  # the open one stays
    assert heard.join(_node("disk_full", 402.0, "node3"), ended=False).id != first.id
