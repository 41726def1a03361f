"""Incidents: alerts that belong together (one fault and its symptoms across the layers and a
few minutes) as one thing, with its probable root cause ranked and the evidence for it.

An alert joins an open incident of its run when it began within ``window_s`` of the
incident's newest alert and its entity fits: the same node, or either of them about the whole
run. Alerts of two nodes at once stay two incidents unless one of the kinds spreads across
nodes (a collective's timeout is every rank's). The root cause is the alert of the deepest
layer (hardware under the network, under the step time, under the loss): a failing GPU
explains a straggler, which explains a slow step, never the other way round. Within a layer
the more severe comes first (a busy CPU more often goes with a problem than is one), then a
measured alert before the log line that reports the same fact, then the earliest, then a
node's before the run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Reversible, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = ["LAYERS", "WINDOW_S", "AlertIncident", "Cause", "incidents", "joins", "root_kinds"]

#: Each kind's layer: the lower, the more likely a cause rather than a symptom.
LAYERS: dict[str, int] = {
    **dict.fromkeys(
        ("node_down", "gpu_errors", "log_gpu_error", "gpu_thermal", "gpu_power_anomaly",
         "disk_full", "log_io_error", "host_memory_leak", "gpu_memory_pressure", "log_oom",
         "checkpoint_slow"),
        0,
    ),
    **dict.fromkeys(("sync_latency", "log_nccl", "dataloader_bottleneck", "cpu_saturation"), 1),
    **dict.fromkeys(("straggler", "step_time_regression", "gpu_underutilized"), 2),
    **dict.fromkeys(
        ("nonfinite", "log_nonfinite", "grad_explosion", "loss_spike", "loss_divergence",
         "grad_vanishing", "loss_plateau"),
        3,
    ),
}  # fmt: skip
#: A kind of no layer (a user's rule) ranks with the symptoms of the step time.
UNKNOWN_LAYER = 2
#: Log alerts that report what a measured alert says: the measured one names the fault.
REPORTS = {"log_nonfinite": "nonfinite", "log_gpu_error": "gpu_errors"}
#: Severities, the most severe first.
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}
#: Kinds whose alerts on several nodes are one thing (a collective fails on every rank).
SPREADING = frozenset({"log_nccl", "sync_latency", "node_down"})
WINDOW_S = 300.0
_LAYER_NAMES = ("hardware or storage", "network or input", "step time", "optimisation")


class _Alert(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def since(self) -> float | None: ...
    @property
    def ts(self) -> float: ...
    @property
    def run(self) -> str | None: ...
    @property
    def labels(self) -> Mapping[str, str]: ...


A = TypeVar("A", bound=_Alert)


def _start(alert: _Alert) -> float:
    return alert.ts if alert.since is None else alert.since


def _layer(kind: str) -> int:
    return LAYERS.get(kind, UNKNOWN_LAYER)


@dataclass(frozen=True)
class Cause(Generic[A]):
    """A candidate root cause: its alert, the rank of the candidates and why."""

    alert: A
    evidence: tuple[str, ...]


@dataclass
class AlertIncident(Generic[A]):
    """Alerts of one run that belong together, earliest first, and their causes ranked."""

    run: str | None
    alerts: list[A] = field(default_factory=list)

    @property
    def id(self) -> str:
        """The id of its first alert: it names the incident for as long as it lasts."""
        return self.alerts[0].id

    @property
    def start(self) -> float:
        return min(_start(a) for a in self.alerts)

    @property
    def last(self) -> float:
        return max(_start(a) for a in self.alerts)

    @property
    def nodes(self) -> set[str]:
        return {n for a in self.alerts if (n := a.labels.get("node")) is not None}

    def fits(self, alert: A, window_s: float) -> bool:
        """Whether ``alert`` belongs here: its run, within the window, an entity that fits."""
        if alert.run != self.run or _start(alert) - self.last > window_s:
            return False
        node = alert.labels.get("node")
        if node is None or not self.nodes or node in self.nodes:
            return True
        return alert.kind in SPREADING and any(a.kind in SPREADING for a in self.alerts)

    def causes(self) -> list[Cause[A]]:
        """Every alert of the incident as a candidate cause, the most probable first."""
        measured = {a.kind for a in self.alerts}
        ranked = sorted(
            self.alerts,
            key=lambda a: (
                _layer(a.kind),
                _SEVERITY.get(a.severity, len(_SEVERITY)),
                REPORTS.get(a.kind) in measured,
                _start(a),
                a.labels.get("node") is None,
                a.kind,
            ),
        )
        begin = self.start
        causes = []
        for alert in ranked:
            layer = _layer(alert.kind)
            said = [f"a {_LAYER_NAMES[layer]} alert"]
            lead = min((_start(a) for a in self.alerts if a is not alert), default=None)
            if lead is not None and _start(alert) <= lead:
                said.append(f"the first of the incident's {len(self.alerts)} alerts")
            elif lead is not None:
                said.append(f"began {_start(alert) - begin:.0f} s after the first")
            explained = sorted({a.kind for a in self.alerts if _layer(a.kind) > layer})
            if explained:
                said.append("may explain " + ", ".join(explained))
            if (node := alert.labels.get("node")) is not None:
                said.append(f"on {node}")
            causes.append(Cause(alert, tuple(said)))
        return causes


def incidents(alerts: Iterable[A], window_s: float = WINDOW_S) -> list[AlertIncident[A]]:
    """Group ``alerts`` into incidents, in the order they began."""
    found: list[AlertIncident[A]] = []
    for alert in sorted(alerts, key=_start):
        home = joins(alert, found, window_s)
        if home is None:
            home = AlertIncident(alert.run)
            found.append(home)
        home.alerts.append(alert)
    return found


def joins(
    alert: A, held: Reversible[AlertIncident[A]], window_s: float = WINDOW_S
) -> AlertIncident[A] | None:
    """The incident of ``held`` (oldest first) that ``alert`` joins, the newest it fits; None
    when it begins an incident of its own. ``incidents`` and the notifier both decide by it."""
    return next((i for i in reversed(held) if i.fits(alert, window_s)), None)


def root_kinds(found: Sequence[AlertIncident[A]]) -> list[str]:
    """The kind of each incident's most probable cause."""
    return [i.causes()[0].alert.kind for i in found]
