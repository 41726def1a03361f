"""The analyst beside detection (``stepwatch server --analyst URL``): every so often, each
incident with an alert still firing that has no analysis yet is sent, with its context, to the
analyst model once it stopped growing for a pass, and the answer kept in the store, where the
incidents list shows it as model-written.

Ingest and detection never wait on the model: the worker has a thread of its own, asks about a
few incidents a pass (the newest first) and skips a pass while ingest is behind. An incident
is analysed once; a failed try is counted, logged and tried again later, a few times at most.
A person may ask again about any incident (``ask``). The answer is text and suggestions: a
playbook it names is shown, never requested; nothing here writes an action or a command.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from .._periodic import Periodic
from ..act import AnalystConfig, AnalystError, Playbooks
from ..act._analyst import ask, suggested
from ..act._analyst_prompt import IncidentContext, LogLine, MetricSummary, prompt
from ..detect import AlertIncident, incidents
from ..store import ActionQuery, AlertQuery, AlertRow, Store, StoredAnalysis
from ._alert_stream import alert_json
from ._detection import live_alert

__all__ = ["GROUPED", "Analyst", "find_incident"]

log = logging.getLogger("stepwatch.server")

Incident = AlertIncident[AlertRow]

#: Alerts grouped into incidents (the newest): by a pass, and by the incidents and groups lists.
GROUPED = 10_000
#: Incidents analysed in one pass at most; the others wait for the next.
MAX_PER_PASS = 4
#: Tries at an incident at most, the n-th after ``RETRY_AFTER_S`` × (n - 1) seconds.
MAX_TRIES = 3
RETRY_AFTER_S = 300.0
#: Incidents people asked about that may wait.
MAX_ASKED = 100
#: How long a stop waits for an answer under way; then it is abandoned (nothing is written).
STOP_WAIT_S = 5.0
#: The metrics' window before an incident, and log lines read before and after it (seconds).
BEFORE_S = 600.0
LOGS_BEFORE_S = 120.0
AFTER_S = 60.0
#: Log lines, actions and commands read of the run.
LOG_LINES = 60
RECENT = 20


def _live(rows: Sequence[AlertRow]) -> list[AlertRow]:
    """The rows the incidents list shows (a record too malformed to read is left out)."""
    return [row for row in rows if live_alert(row) is not None]


def find_incident(store: Store, incident_id: str) -> Incident | None:
    """The incident whose first alert is ``incident_id``, from its run's alerts; None when
    that alert is unknown or begins no incident."""
    row = store.current.alert(incident_id)
    if row is None:
        return None
    rows = store.current.alerts(AlertQuery("all", row.run), None, GROUPED).items
    return next((i for i in incidents(_live(rows)) if i.id == incident_id), None)


def _ranges(store: Store, run: str, start: float, end: float) -> dict[str, list[float]]:
    """Per metric of the run: the finite minima and maxima of its series over the window."""
    found: dict[str, list[float]] = {}
    for info, data in store.downsample_many(None, {"run": run}, start, end, 1, ("min", "max")):
        values = np.concatenate([data["min"], data["max"]])
        found.setdefault(info.key.name, []).extend(values[np.isfinite(values)].tolist())
    return found


def _metrics(store: Store, run: str, start: float, last: float) -> list[MetricSummary]:
    """The run's metrics in the window before the incident and during it."""
    before = _ranges(store, run, start - BEFORE_S, start)
    during = _ranges(store, run, start, last + AFTER_S)
    series = Counter(i.key.name for i in store.series(None, {"run": run}))
    return [
        MetricSummary(
            name,
            series[name],
            (min(before[name]), max(before[name])) if before.get(name) else None,
            (min(during[name]), max(during[name])) if during.get(name) else None,
        )
        for name in sorted(set(before) | set(during))
    ]


def _context(store: Store, incident: Incident, playbooks: Playbooks) -> IncidentContext:
    """What the analyst is told of ``incident``, read from the store."""
    run, start, last = incident.run, incident.start, incident.last
    alerts = [alert_json(a) for a in map(live_alert, incident.alerts) if a is not None]
    causes = [(c.alert.kind, c.evidence) for c in incident.causes()[:3]]
    metrics, logs, actions, commands = [], [], [], []
    if run is not None:
        metrics = _metrics(store, run, start, last)
        lines = store.logs(run=run, start=start - LOGS_BEFORE_S, end=last + AFTER_S,
                           limit=LOG_LINES)  # fmt: skip
        logs = [LogLine(e.ts, e.labels, e.text) for e in lines]
        acted = store.current.actions(ActionQuery(run), None, RECENT).items[::-1]
        actions = [
            {k: a.get(k) for k in ("playbook", "state", "requested_by", "labels", "created")}
            for a in acted
        ]
        commands = [
            {k: c.get(k) for k in ("action", "args", "status", "by", "reason", "ts")}
            for c in store.current.commands(run)[-RECENT:]
        ]
    return IncidentContext(
        incident.id, run, start, last, alerts, causes, metrics, logs, actions,
        commands, [(p.name, p.description) for p in playbooks],
    )  # fmt: skip


class Analyst:
    """A thread that, every ``config.interval_s``, has the analyst model analyse the firing
    incidents of ``store`` that have no analysis yet, and those people asked about.

    Args:
        store: the collector's store (its alerts, metrics, logs; analyses are kept there).
        config: the analyst's endpoint and model.
        playbooks: the allow-list: the only names a suggestion may give.
        clock: wall time, to date the analyses and space the tries.
        behind: True while ingest is behind: the pass is skipped.
    """

    def __init__(
        self,
        store: Store,
        config: AnalystConfig,
        playbooks: Playbooks,
        *,
        clock: Callable[[], float] = time.time,
        behind: Callable[[], bool] = lambda: False,
    ) -> None:
        self.config, self._store, self._playbooks = config, store, playbooks
        self._clock, self._behind = clock, behind
        self._lock = threading.Lock()
        #: The incidents people asked about, as grouped when asked; the first asked goes first.
        self._asked: dict[str, Incident] = {}
        self._seen: dict[str, int] = {}  # the due incidents of the last pass: their alerts
        #: Analyses by outcome: ``ok`` or why a try failed (``AnalystError.reason``).
        self.outcomes: Counter[str] = Counter()
        self._worker = Periodic(
            self.tick,
            config.interval_s,
            name="stepwatch-analyst",
            failed=f"the analyst's pass failed; trying again in {config.interval_s:g} s",
            log=log,
        )

    def start(self) -> Analyst:
        log.info("incidents are analysed by %s at %s", self.config.model, self.config.where)
        self._worker.start()
        return self

    def stop(self) -> None:
        """End the thread, abandoning an answer not come within ``STOP_WAIT_S``."""
        self._worker.request_stop()
        if not self._worker.join(STOP_WAIT_S):
            log.warning("stopped without the analyst's answer under way")

    def ask(self, incident: Incident) -> bool:
        """Analyse ``incident`` (again) at the next pass, which starts now; False when too many
        wait already. The asker found it (``find_incident``): the pass need not group again."""
        with self._lock:
            if incident.id not in self._asked and len(self._asked) >= MAX_ASKED:
                return False
            self._asked[incident.id] = incident
        self._worker.wake()
        return True

    def asked(self, incident_id: str) -> bool:
        """Whether a person's ask about the incident waits for a pass."""
        with self._lock:
            return incident_id in self._asked

    def tick(self) -> int:
        """One pass; the number of incidents the model was asked about."""
        if self._behind():
            log.debug("ingest is behind: incidents are analysed at the next pass")
            return 0
        due = list({i.id: i for i in self._taken() + self._firing()}.values())
        for incident in due[:MAX_PER_PASS]:
            if self._worker.stopping:
                break
            self._analyse(incident)
        return min(len(due), MAX_PER_PASS)

    def _taken(self) -> list[Incident]:
        """The incidents people asked about, taken off the list (up to a pass's worth)."""
        with self._lock:
            taken = list(self._asked.values())[:MAX_PER_PASS]
            for incident in taken:
                del self._asked[incident.id]
        return taken

    def _firing(self) -> list[Incident]:
        """The incidents with an alert open and tries left that the last pass saw as they are
        (a fault's symptoms join within seconds: they are in the question), newest first."""
        rows = self._store.current.alerts(AlertQuery("all"), None, GROUPED).items
        found = [i for i in incidents(_live(rows)) if any(a.open for a in i.alerts)][::-1]
        kept = self._store.analyses.of_incidents([i.id for i in found])
        due = [i for i in found if self._due(kept.get(i.id))]
        seen, self._seen = self._seen, {i.id: len(i.alerts) for i in due}
        return [i for i in due if seen.get(i.id) == len(i.alerts)]

    def _due(self, kept: StoredAnalysis | None) -> bool:
        if kept is None:
            return True
        if kept.done or kept.tries >= MAX_TRIES:
            return False
        return self._clock() - kept.at >= RETRY_AFTER_S * kept.tries

    def _analyse(self, incident: Incident) -> None:
        """Ask about one incident and keep the answer, or count the failed try."""
        incident_id, run, model = incident.id, incident.run, self.config.model
        messages = prompt(_context(self._store, incident, self._playbooks))
        try:
            text = ask(self.config, messages)
        except AnalystError as exc:
            if self._worker.stopping:
                return
            self.outcomes[exc.reason] += 1
            tries = self._store.analyses.failed(incident_id, run, self._clock(), model, str(exc))
            log.warning(
                "no analysis of incident %s (try %d of %d): %s", incident_id, tries, MAX_TRIES, exc
            )
            return
        if self._worker.stopping:
            return  # abandoned: the store may be closing
        names = suggested(text, [p.name for p in self._playbooks])
        self._store.analyses.put(incident_id, run, self._clock(), model, text, names)
        self.outcomes["ok"] += 1
        log.info("incident %s analysed by %s", incident_id, model)
