"""Remediation: requests (by an alert or by hand) become actions; destructive real runs wait
for approval; the runner thread executes them. Every request, refusal, decision and run is an
audit record, written with the action's new state."""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path

from ..detect import AlertState, LiveAlert
from ..model import Event
from ._actions import Action, ActionState
from ._audit import AuditRecord
from ._incident_playbook import IncidentPlaybook, incident_playbooks
from ._playbook import Playbook, PlaybookError
from ._playbook_file import Playbooks
from ._runner import Outcome, Runner, run_process

__all__ = ["ActionConflict", "NotAllowed", "Remediation", "UnknownAction"]

log = logging.getLogger("stepwatch.act")

Write = Callable[[Sequence[Event]], None]
#: Plain output from ansible-playbook, whatever the collector's terminal.
_ANSIBLE_ENV = {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "0"}


class NotAllowed(PlaybookError):
    """A playbook outside the allow-list, or a real run of an entry that only runs dry."""


class UnknownAction(KeyError):
    """No action has this id."""


class ActionConflict(ValueError):
    """The action is not waiting for a decision (already approved, rejected or run)."""


class Remediation:
    """The actions of one collector over an allow-list of playbooks.

    Args:
        playbooks: the allow-list; nothing else ever runs.
        write: stores events and returns once they are stored (the collector's event log).
        clock: wall time of requests and outcomes.
        restored: the unfinished actions a previous life stored: pending ones keep waiting,
            queued ones run, one that was running is marked failed.
    """

    def __init__(
        self,
        playbooks: Playbooks,
        write: Write,
        *,
        clock: Callable[[], float] = time.time,
        restored: Iterable[Action] = (),
    ) -> None:
        self.playbooks, self._write, self._clock = playbooks, write, clock
        self._lock = threading.Lock()
        self._actions = {a.id: a for a in restored}
        self.runner = Runner()
        #: Playbook runs of this process by result (ok, dry-run, failed, timeout); the runner
        #: thread counts, the collector's metrics read.
        self.runs: Counter[str] = Counter()

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> Remediation:
        """Settle what a previous life left unfinished, then start the runner."""
        self.runner.start()
        for action in list(self._actions.values()):
            if action.state == ActionState.RUNNING:
                failed = action.but(
                    state=ActionState.FAILED, error="the collector stopped", updated=self._clock()
                )
                self._actions[action.id] = failed
                self._save(failed)
            elif action.state == ActionState.QUEUED:
                self.runner.submit(partial(self._execute, action.id))
        return self

    def stop(self) -> None:
        """Cut a running playbook short and end the runner."""
        self.runner.stop()

    # ---- requests and decisions ---------------------------------------------------------

    def on_alert(self, alert: LiveAlert) -> None:
        """A LiveDetector subscriber: a firing alert requests the playbooks its kind triggers
        (on the runner thread: the detector never waits on us)."""
        if alert.state != AlertState.FIRING:
            return
        for playbook in self.playbooks.triggered_by(alert.kind):
            self.runner.submit(partial(self._triggered, playbook.name, alert))

    def _triggered(self, name: str, alert: LiveAlert) -> None:
        with self._lock:
            busy = any(
                a.playbook == name and a.labels == alert.labels and not a.final
                for a in self._actions.values()
            )
        if busy:
            log.info("%s already waits or runs for %s; not requested again", name, alert.labels)
            return
        try:
            self.request(name, alert.labels, f"alert:{alert.kind}", alert.id, alert.kind)
        except PlaybookError as exc:
            log.warning("alert %s could not request %s: %s", alert.id, name, exc)

    def request(
        self,
        name: str,
        labels: Mapping[str, str],
        by: str,
        alert_id: str = "",
        kind: str = "",
        dry_run: bool | None = None,
    ) -> Action:
        """A run of playbook ``name`` on ``labels``: queued, or pending approval when it is a
        destructive real run. ``dry_run`` None is the entry's own choice. A refusal
        (NotAllowed, PlaybookError) is audited and raised."""
        labels = dict(labels)
        base = AuditRecord("playbook", by, f"request {name}", "", labels, alert_id, kind)
        try:
            playbook = self._allowed(name, dry_run)
            dry = playbook.dry_run if dry_run is None else dry_run
            prepared = playbook.prepare(labels, dry, "<vars file>")
        except PlaybookError as exc:
            self._audit(base, "refused", error=str(exc))
            raise
        state = ActionState.PENDING if playbook.destructive and not dry else ActionState.QUEUED
        now = self._clock()
        action = Action(
            Action.new_id(), name, labels, dry, state, by, now, now, alert_id, kind,
            command=str(prepared),
        )  # fmt: skip
        with self._lock:
            self._actions[action.id] = action
        self._save(action, self._record(base, state, action))
        if state == ActionState.QUEUED:
            self.runner.submit(partial(self._execute, action.id))
        return action

    def _allowed(self, name: str, dry_run: bool | None) -> Playbook:
        try:
            playbook = self.playbooks.get(name)
        except PlaybookError as exc:
            raise NotAllowed(str(exc)) from None
        if dry_run is False and playbook.dry_run:
            raise NotAllowed(f"playbook {name!r} only runs dry (dry_run: true in its entry)")
        return playbook

    def approve(self, action_id: str, by: str, comment: str = "") -> Action:
        """One approval of a pending action: it runs once the playbook's ``approvals``
        distinct approvers, none of them its requester, said yes. NotAllowed for the
        requester, an ActionConflict when it is not pending or ``by`` approved it already."""
        action = self._decide(action_id, ActionState.QUEUED, by, comment)
        if action.state == ActionState.QUEUED:
            self.runner.submit(partial(self._execute, action_id))
        return action

    def reject(self, action_id: str, by: str, comment: str = "") -> Action:
        """Refuse a pending action; it never runs."""
        return self._decide(action_id, ActionState.REJECTED, by, comment)

    def _approved(self, action: Action, by: str) -> tuple[str, ...]:
        """The approvers with ``by``, who must be someone other than those so far."""
        if by == action.requested_by:
            raise NotAllowed(f"{by} requested action {action.id}: another identity must approve it")
        if by in action.approvals:
            raise ActionConflict(f"{by} approved action {action.id} already: it needs another")
        return (*action.approvals, by)

    def _needed(self, action: Action) -> int:
        try:
            return self.playbooks.get(action.playbook).approvals
        except PlaybookError:
            return 1  # gone from the allow-list: it never runs anyway (``_execute`` fails it)

    def _decide(self, action_id: str, state: str, by: str, comment: str) -> Action:
        with self._lock:
            action = self.get(action_id)
            if action.state != ActionState.PENDING:
                raise ActionConflict(f"action {action_id} is {action.state}, not pending")
            approvals = action.approvals
            if state == ActionState.QUEUED:
                approvals = self._approved(action, by)
                if len(approvals) < self._needed(action):
                    state = ActionState.PENDING
            decided = action.but(
                state=state, decided_by=by, comment=comment, updated=self._clock(),
                approvals=approvals,
            )  # fmt: skip
            self._actions[action_id] = decided
        if state == ActionState.REJECTED:
            verb, result = "reject", "rejected"
        elif state == ActionState.PENDING:
            verb, result = "approve", f"approved {len(approvals)} of {self._needed(action)}"
        else:
            verb, result = "approve", "approved"
        base = AuditRecord("approval", by, f"{verb} {action.playbook}", result, action.labels)
        record = self._record(base, result, decided, comment=comment)
        self._save(decided, record)
        return decided

    def get(self, action_id: str) -> Action:
        """The action as it stands; UnknownAction for an id never seen."""
        try:
            return self._actions[action_id]
        except KeyError:
            raise UnknownAction(action_id) from None

    def actions(self) -> list[Action]:
        """Every action, newest first."""
        with self._lock:
            found = list(self._actions.values())
        return sorted(found, key=lambda a: (a.created, a.id), reverse=True)

    def for_incident(self, kind: str, alert_ids: Collection[str]) -> list[IncidentPlaybook]:
        """The playbooks of an incident whose root cause is of ``kind``, with the actions its
        alerts ``alert_ids`` filed (for the incidents' API and their notifications)."""
        entries = self.playbooks.triggered_by(kind)  # most kinds trigger none: no actions read
        return incident_playbooks(entries, self.actions(), alert_ids) if entries else []

    # ---- the runner thread --------------------------------------------------------------

    def _execute(self, action_id: str) -> None:
        with self._lock:
            action = self._actions[action_id]
            if action.state != ActionState.QUEUED:
                return
            running = action.but(state=ActionState.RUNNING, updated=self._clock())
            self._actions[action_id] = running
        self._save(running)
        outcome = self._run(self.playbooks.get(action.playbook), running)
        if outcome.timed_out:
            state = ActionState.TIMEOUT
        else:
            state = ActionState.OK if outcome.exit_code == 0 else ActionState.FAILED
        done = running.but(
            state=state,
            updated=self._clock(),
            exit_code=outcome.exit_code,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
            duration_s=round(outcome.duration_s, 3),
            error=outcome.error,
        )
        with self._lock:
            self._actions[action_id] = done
        result = "dry-run" if state == ActionState.OK and done.dry_run else state
        self.runs[result] += 1
        actor = done.decided_by or done.requested_by
        base = AuditRecord("playbook", actor, f"run {done.playbook}", "", done.labels)
        self._save(done, self._record(base, result, done, exit_code=outcome.exit_code))

    def _run(self, playbook: Playbook, action: Action) -> Outcome:
        """Execute for real, or as the dry run: ``--check`` for Ansible, the argv echoed for
        a command."""
        with tempfile.TemporaryDirectory(prefix="stepwatch-act-") as tmp:
            vars_path = str(Path(tmp) / "vars.yaml")
            try:
                prepared = playbook.prepare(action.labels, action.dry_run, vars_path)
            except PlaybookError as exc:
                return Outcome(None, "", "", 0.0, error=str(exc))
            if playbook.kind == "command" and action.dry_run:
                return Outcome(0, f"dry run: {prepared}\n", "", 0.0)
            if prepared.vars_text:
                Path(vars_path).write_text(prepared.vars_text, encoding="utf-8")
            env = {**os.environ, **_ANSIBLE_ENV} if playbook.kind == "ansible" else None
            return run_process(
                prepared.argv, playbook.timeout_s, cwd=tmp, env=env, stop=self.runner.stopping
            )

    # ---- records ------------------------------------------------------------------------

    def _record(
        self, base: AuditRecord, result: str, action: Action, **detail: object
    ) -> AuditRecord:
        """``base`` as the record of what happened to ``action``."""
        info = {"action_id": action.id, "dry_run": action.dry_run, "command": action.command}
        return dataclasses.replace(
            base,
            result=result,
            alert_id=action.alert_id,
            kind=action.kind,
            detail={**info, **detail},
        )

    def _audit(self, record: AuditRecord, result: str, **detail: object) -> None:
        """A record with no action behind it (a refused request)."""
        self._write(
            [dataclasses.replace(record, result=result, detail=detail).to_event(self._clock())]
        )

    def _save(self, action: Action, record: AuditRecord | None = None) -> None:
        events = [action.to_event()]
        if record is not None:
            events.append(record.to_event(action.updated))
        self._write(events)
