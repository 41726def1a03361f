"""Scoring alerts against labelled scenarios: which faults were found, in time, and what was noise.

The rules are those of the scenario format. A label is found by an alert of its kind that names
its entity (or a part of it: a GPU alert names its node, a rank names its node and GPU) and
starts within [start - 30 s, end + 120 s]; timely when that first alert is no later than the
label's deadline. Alerts of one kind and entity less than 600 s apart form one incident, true
when it matches a label or is one of a label's ``also`` kinds (a secondary symptom) on the same
node, false otherwise. A forecast (``PRECURSORS``) is true when a fault it foretells comes to
its entity: a label of one of those kinds that starts within the forecast's lead after it (or
is under way). False incidents on scenarios without faults count per clean hour.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..alerts import AlertRecord, read_alerts

__all__ = [
    "INCIDENT_GAP_S",
    "PRECURSORS",
    "WINDOW_AFTER_S",
    "WINDOW_BEFORE_S",
    "Incident",
    "KindScore",
    "Label",
    "LabelOutcome",
    "Precursor",
    "Scenario",
    "Score",
    "score",
]

#: An alert this long before a label's start still counts for it (clocks, smoothing).
WINDOW_BEFORE_S = 30.0
#: An alert this long after a label's end still counts for it (the data shows the fault late).
WINDOW_AFTER_S = 120.0
#: Alerts of one kind and entity closer than this are one incident.
INCIDENT_GAP_S = 600.0
LABELS_FILE = "labels.json"


@dataclass(frozen=True, slots=True)
class Precursor:
    """What a forecast kind foretells: the fault kinds it warns of, and how long before one
    of them a warning still counts (the forecast rule's horizon)."""

    kinds: tuple[str, ...]
    lead_s: float


#: The forecast kinds, each a true early warning of the faults it names, never a false alarm
#: for coming before them: GPU memory running out shows as gpu_memory_pressure and ends in
#: log_oom; host memory as host_memory_leak and the kernel OOM killer's line (log_oom); a
#: disk filling as disk_full and the failed save (log_io_error); heat as gpu_thermal. The one
#: place scoring (and bench/detect.py, which hands other scorers the faults' kinds only) learns
#: them; a forecast finds no label of its own, so it adds to no kind's recall.
PRECURSORS: dict[str, Precursor] = {
    "forecast_oom": Precursor(("gpu_memory_pressure", "log_oom"), 3600.0),
    "forecast_host_oom": Precursor(("host_memory_leak", "log_oom"), 1800.0),
    "forecast_disk_full": Precursor(("disk_full", "log_io_error"), 6 * 3600.0),
    "forecast_thermal": Precursor(("gpu_thermal",), 1800.0),
}

Entity = dict[str, str | int]


@dataclass(frozen=True, slots=True)
class Label:
    """One injected fault as ground truth: what, where, when, and by when it should be found.

    ``entity`` holds any of ``node`` (a host name), ``gpu`` and ``rank``; empty means the run.
    ``also`` names kinds that are secondary symptoms of it on the same node.
    """

    kind: str
    entity: Entity
    start: float
    end: float
    deadline: float
    also: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "entity": dict(self.entity),
            "start": self.start,
            "end": self.end,
            "deadline": self.deadline,
            "also": list(self.also),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Label:
        entity = {k: v for k, v in dict(obj.get("entity") or {}).items() if v is not None}
        return cls(
            str(obj["kind"]),
            entity,
            float(obj["start"]),
            float(obj["end"]),
            float(obj["deadline"]),
            tuple(str(k) for k in obj.get("also") or ()),
        )


@dataclass(frozen=True, slots=True)
class Scenario:
    """What scoring needs of a scenario's labels.json: its run, shape, time span and labels."""

    run: str
    gpus_per_node: int
    start: float
    end: float
    labels: tuple[Label, ...]

    @property
    def clean(self) -> bool:
        """A scenario without faults: every alert on it is a false one."""
        return not self.labels

    @classmethod
    def read(cls, path: str | Path) -> Scenario:
        """The scenario of a folder (its labels.json) or of a labels.json itself."""
        path = Path(path)
        if path.is_dir():
            path = path / LABELS_FILE
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                str(meta["run"]),
                int(meta["gpus_per_node"]),
                float(meta["start"]),
                float(meta["end"]),
                tuple(Label.from_json(obj) for obj in meta["labels"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a scenario's labels: {e}") from e


@dataclass(frozen=True, slots=True)
class _Where:
    """An entity with rank resolved to its node and GPU."""

    node: str | None
    gpu: int | None
    rank: int | None

    @classmethod
    def of(cls, labels: Mapping[str, object], gpus_per_node: int) -> _Where:
        node = labels.get("node")
        gpu, rank = _int(labels.get("gpu")), _int(labels.get("rank"))
        if rank is not None:
            node = node if node is not None else f"node{rank // gpus_per_node}"
            gpu = gpu if gpu is not None else rank % gpus_per_node
        return cls(None if node is None else str(node), gpu, rank)

    def names(self, target: _Where) -> bool:
        """Whether an alert here names ``target`` or a part of it (the run is named by any)."""
        if target.node is None:
            return True
        return self.node == target.node and all(
            a is None or b is None or a == b
            for a, b in ((self.gpu, target.gpu), (self.rank, target.rank))
        )


def _int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


@dataclass(frozen=True, slots=True)
class Incident:
    """Alerts of one kind and entity, each less than INCIDENT_GAP_S after the one before."""

    run: str
    kind: str
    entity: Entity
    start: float
    alerts: tuple[float, ...]
    true: bool


@dataclass(frozen=True, slots=True)
class LabelOutcome:
    """How one label fared: its first matching alert (None when missed) and whether in time."""

    run: str
    label: Label
    first: float | None

    @property
    def found(self) -> bool:
        return self.first is not None

    @property
    def timely(self) -> bool:
        return self.first is not None and self.first <= self.label.deadline

    @property
    def delay(self) -> float | None:
        return None if self.first is None else self.first - self.label.start


@dataclass(slots=True)
class KindScore:
    """Counts of one kind: labels found and in time, incidents raised and how many were true."""

    kind: str
    labels: int = 0
    found: int = 0
    timely: int = 0
    incidents: int = 0
    true_incidents: int = 0
    delays: list[float] = field(default_factory=list)

    @property
    def recall(self) -> float | None:
        return self.found / self.labels if self.labels else None

    @property
    def timely_recall(self) -> float | None:
        return self.timely / self.labels if self.labels else None

    @property
    def precision(self) -> float | None:
        return self.true_incidents / self.incidents if self.incidents else None

    @property
    def median_delay(self) -> float | None:
        return statistics.median(self.delays) if self.delays else None


@dataclass(frozen=True, slots=True)
class Score:
    """The score of a set of alerts over labelled scenarios, per kind and overall."""

    kinds: dict[str, KindScore]
    outcomes: tuple[LabelOutcome, ...]
    incidents: tuple[Incident, ...]
    clean_hours: float
    clean_false_incidents: int

    @property
    def total(self) -> KindScore:
        """Every kind summed into one row."""
        out = KindScore("all")
        for k in self.kinds.values():
            out.labels += k.labels
            out.found += k.found
            out.timely += k.timely
            out.incidents += k.incidents
            out.true_incidents += k.true_incidents
            out.delays += k.delays
        return out

    @property
    def precision(self) -> float | None:
        return self.total.precision

    @property
    def recall(self) -> float | None:
        return self.total.recall

    @property
    def timely_recall(self) -> float | None:
        return self.total.timely_recall

    @property
    def clean_false_per_hour(self) -> float | None:
        """False incidents per hour of the scenarios without faults (None without such hours)."""
        return self.clean_false_incidents / self.clean_hours if self.clean_hours else None

    @property
    def missed(self) -> list[LabelOutcome]:
        return [o for o in self.outcomes if not o.timely]

    @property
    def false_incidents(self) -> list[Incident]:
        return [i for i in self.incidents if not i.true]

    def table(self) -> str:
        """The per-kind table, a total row and the clean-run false alert rate, as text."""
        head = (
            f"{'kind':<24}{'labels':>7}{'found':>7}{'timely':>7}{'recall':>8}{'timely%':>8}"
            f"{'incid.':>7}{'false':>6}{'precision':>10}{'median delay':>14}"
        )
        rows = [head]
        for k in [*sorted(self.kinds.values(), key=lambda k: k.kind), self.total]:
            delay = k.median_delay
            rows.append(
                f"{k.kind:<24}{k.labels:>7}{k.found:>7}{k.timely:>7}{_pct(k.recall):>8}"
                f"{_pct(k.timely_recall):>8}{k.incidents:>7}{k.incidents - k.true_incidents:>6}"
                f"{_pct(k.precision):>10}{'-' if delay is None else f'{delay:.0f} s':>14}"
            )
        rate = self.clean_false_per_hour
        rows.append(
            f"false alerts per clean hour: {'-' if rate is None else f'{rate:.2f}'} "
            f"({self.clean_false_incidents} over {self.clean_hours:.2f} h)"
        )
        return "\n".join(rows)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def score(
    alerts: Iterable[AlertRecord] | str | Path,
    scenarios: Iterable[Scenario | str | Path],
) -> Score:
    """Score ``alerts`` (records or an alerts.jsonl) against the labels of ``scenarios``
    (Scenario objects, scenario folders or labels.json files); alerts of other runs are ignored.
    """
    records = read_alerts(alerts) if isinstance(alerts, (str, Path)) else alerts
    known = [s if isinstance(s, Scenario) else Scenario.read(s) for s in scenarios]
    by_run: dict[str, list[AlertRecord]] = {s.run: [] for s in known}
    for record in records:
        if (run := record.labels.get("run")) in by_run:
            by_run[str(run)].append(record)
    kinds: dict[str, KindScore] = {}
    outcomes: list[LabelOutcome] = []
    incidents: list[Incident] = []
    clean_hours, clean_false = 0.0, 0
    for scenario in known:
        got = sorted(by_run[scenario.run], key=lambda r: r.ts)
        for label in scenario.labels:
            outcome = _outcome(scenario, label, got)
            outcomes.append(outcome)
            k = kinds.setdefault(label.kind, KindScore(label.kind))
            k.labels += 1
            k.found += outcome.found
            k.timely += outcome.timely
            if outcome.delay is not None:
                k.delays.append(outcome.delay)
        for incident in _incidents(scenario, got):
            incidents.append(incident)
            k = kinds.setdefault(incident.kind, KindScore(incident.kind))
            k.incidents += 1
            k.true_incidents += incident.true
            clean_false += scenario.clean and not incident.true
        if scenario.clean:
            clean_hours += max(scenario.end - scenario.start, 0.0) / 3600
    return Score(kinds, tuple(outcomes), tuple(incidents), clean_hours, clean_false)


def _in_window(ts: float, label: Label) -> bool:
    return label.start - WINDOW_BEFORE_S <= ts <= label.end + WINDOW_AFTER_S


def _outcome(scenario: Scenario, label: Label, alerts: list[AlertRecord]) -> LabelOutcome:
    """The first alert of the label's kind naming its entity within its window (sorted input)."""
    target = _Where.of(label.entity, scenario.gpus_per_node)
    for alert in alerts:
        if (
            alert.kind == label.kind
            and _in_window(alert.ts, label)
            and _Where.of(alert.labels, scenario.gpus_per_node).names(target)
        ):
            return LabelOutcome(scenario.run, label, alert.ts)
    return LabelOutcome(scenario.run, label, None)


def _explains(scenario: Scenario, kind: str, where: _Where, ts: float) -> bool:
    """Whether some label accounts for an alert: its own kind and entity, a secondary symptom
    (an ``also`` kind) on the label's node (a run-wide alert is on every node), or a forecast
    of it on its entity."""
    ahead = PRECURSORS.get(kind)
    for label in scenario.labels:
        target = _Where.of(label.entity, scenario.gpus_per_node)
        if ahead is not None and label.kind in ahead.kinds and where.names(target):
            if label.start - ahead.lead_s <= ts <= label.end + WINDOW_AFTER_S:
                return True
        if not _in_window(ts, label):
            continue
        if kind == label.kind and where.names(target):
            return True
        if kind in label.also and (None in (where.node, target.node) or where.node == target.node):
            return True
    return False


def _incidents(scenario: Scenario, alerts: list[AlertRecord]) -> list[Incident]:
    """The alerts of one scenario (sorted by ts) grouped into incidents, each judged.

    An entity is its node and GPU, so a rank's alerts and its GPU's are one entity's.
    """
    groups: dict[tuple[str, _Where], list[float]] = {}
    for alert in alerts:
        where = _Where.of(alert.labels, scenario.gpus_per_node)
        groups.setdefault((alert.kind, _Where(where.node, where.gpu, None)), []).append(alert.ts)
    out: list[Incident] = []
    for (kind, where), times in groups.items():
        entity: Entity = {
            k: v for k, v in (("node", where.node), ("gpu", where.gpu)) if v is not None
        }
        runs: list[list[float]] = []
        for ts in times:
            if not runs or ts - runs[-1][-1] >= INCIDENT_GAP_S:
                runs.append([])
            runs[-1].append(ts)
        for run in runs:
            true = any(_explains(scenario, kind, where, ts) for ts in run)
            out.append(Incident(scenario.run, kind, entity, run[0], tuple(run), true))
    return sorted(out, key=lambda i: (i.start, i.kind))
