"""The policy engine: firing alerts become commands for their run, step by step.

When an alert of a policy's kinds fires on a run (and is neither silenced nor
inhibited), the policy's steps run in order, each ``after`` its delay and only
while the alert still fires: notify, then mitigate, then checkpoint and stop.
A cool-down keeps a policy off a run it acted on lately, and a run gets at
most ``max_actions_per_run`` automatic commands. With ``observe_only`` nothing
is sent: each decision is audited as what it would have done. Every decision,
taken or not, is an audit record. A ``profile`` step profiles the rank the alert names (a
straggler's), or every rank when it names none.

Across restarts the engine is a part of the collector's checkpoint (``snapshot`` and
``restore``); the audit trail since the checkpoint says which steps were taken after it, so
none is taken twice, a budget spent stays spent and a cool-down runs on in wall time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from .._periodic import Periodic
from ..detect import AlertState, LiveAlert
from ..model import Event
from ._audit import AuditRecord
from ._commands import CommandBook
from ._policies import RANK_ACTIONS, Policies, Policy, PolicyStep
from ._policy_state import Escalation, PolicyState
from ._state import History, audits

__all__ = ["PolicyEngine"]

log = logging.getLogger("stepwatch.act")

Record = Callable[[Sequence[Event]], object]


def concerned(alert: LiveAlert, step: PolicyStep) -> tuple[int, ...]:
    """The ranks a step's command is for: a command a rank applies on its own (``profile``)
    goes to the rank the alert names (a straggler's); any other, or an alert naming no rank,
    to every rank."""
    rank = alert.labels.get("rank", "")
    if step.action not in RANK_ACTIONS or not rank.isdecimal():
        return ()
    return (int(rank),)


class PolicyEngine:
    """Turns alert transitions into commands (see the module doc).

    Args:
        policies: the policies in force now (re-read at each decision, so a rule reload
            applies at once); None means no policies.
        book: where commands are queued.
        record: stores events (commands and audit records); must not block for long.
        clock: wall time for delays and cool-downs.
        tick_s: how often the engine's thread checks for steps that are due.
        history: the collector's records since a wall time, read once by ``restore`` to
            catch up with the decisions taken after the checkpoint.
    """

    name = "policy"

    def __init__(
        self,
        policies: Callable[[], Policies | None],
        book: CommandBook,
        record: Record,
        *,
        clock: Callable[[], float] = time.time,
        tick_s: float = 0.25,
        history: History | None = None,
    ) -> None:
        self._policies, self._book, self._record = policies, book, record
        self._clock, self._history = clock, history
        self._state = PolicyState()
        self._restored_at: float | None = None
        self._lock = threading.Lock()
        self._worker = Periodic(
            self.tick,
            tick_s,
            name="stepwatch-policy",
            failed="the policy engine failed on a tick; carrying on",
            log=log,
        )

    def actions(self, run: str) -> int:
        """Automatic commands issued (or, observing only, that would have been) for ``run``."""
        with self._lock:
            return self._state.actions.get(run, 0)

    # ---- the checkpoint -----------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Escalations, budgets and cool-downs as they stand between two decisions."""
        with self._lock:
            body = self._state.body(self._clock())
        return PolicyState.encode(body)

    def restore(self, state: bytes) -> None:
        """Take back a snapshot and the decisions recorded since it was taken (call before
        ``start``); ValueError, and nothing changed, for a snapshot it cannot read."""
        restored, taken = PolicyState.decode(state, self._policies())
        restored.catch_up(audits(self._history, taken, "policy"))
        with self._lock:
            self._state, self._restored_at = restored, self._clock()
        log.info(
            "policy state restored: %d escalations under way, %d runs with automatic commands",
            len(restored.active),
            len(restored.actions),
        )

    # ---- decisions ----------------------------------------------------------------------

    def on_alert(self, alert: LiveAlert) -> None:
        """A transition (muted ones too: a muted alert starts nothing, but its end counts)."""
        run = alert.labels.get("run")
        with self._lock:
            if alert.state != AlertState.FIRING:
                for key in [k for k in self._state.active if k[1] == alert.id]:
                    self._end(self._state.active[key], "the alert resolved")
                    self._state.finish(key)
                return
            policies = self._policies()
            if run is None or alert.muted or policies is None:
                return
            now = self._clock()
            for policy in policies.matching(alert.kind, alert.rule):
                self._begin(policy, alert, run, now)
            self._due(policies, now)

    def _begin(self, policy: Policy, alert: LiveAlert, run: str, now: float) -> None:
        state, key = self._state, (policy.name, alert.id)
        past = state.past.get(key)
        if past is not None and (past.over or past.done >= len(policy.steps)):
            return  # this alert's escalation is over: a transition handed over again
        if key in state.active or any(
            e.policy.name == policy.name and e.run == run for e in state.active.values()
        ):
            return  # already escalating on this run for this or another alert of its kinds
        if past is not None:  # begun before a restart: it goes on (its own cool-down aside)
            state.active[key] = Escalation(policy, alert, run, past.started, past.done)
            return
        last = state.acted.get((policy.name, run))
        if last is not None and now - last < policy.cooldown_s:
            left = policy.cooldown_s - (now - last)
            self._decide(policy, alert, run, "skipped", f"{policy.name}: cooling down", {
                "why": f"cool-down: acted {now - last:.0f}s ago, {left:.0f}s left"})  # fmt: skip
            return
        state.active[key] = Escalation(policy, alert, run, now)
        if policy.steps and policy.steps[0].after_s > 0:  # nothing is done at once: a restart
            # before the first step learns from this record when the escalation began
            what = f"{policy.name}: escalation begun"
            self._decide(policy, alert, run, "begun", what, {"started": now})

    def tick(self) -> None:
        """Take every step whose delay has passed (the engine's thread calls this)."""
        with self._lock:
            policies = self._policies()
            if policies is not None:
                self._due(policies, self._clock())

    def _due(self, policies: Policies, now: float) -> None:
        for key, esc in list(self._state.active.items()):
            steps = esc.policy.steps
            while esc.done < len(steps) and now - esc.started >= steps[esc.done].after_s:
                self._take(policies, esc, steps[esc.done], now)
                esc.done += 1
            if esc.done >= len(steps):
                self._state.finish(key)

    def _take(self, policies: Policies, esc: Escalation, step: PolicyStep, now: float) -> None:
        policy, alert, run = esc.policy, esc.alert, esc.run
        what = f"{policy.name}: step {esc.done + 1} {step.action}"
        detail = self._detail(esc, step, now)
        if not step.is_command:
            self._decide(policy, alert, run, "ok", what, detail)
            return
        if self._state.actions.get(run, 0) >= policies.max_actions_per_run:
            why = f"the run had its {policies.max_actions_per_run} automatic actions"
            self._decide(policy, alert, run, "skipped", what, detail | {"why": why})
            return
        self._state.spend(policy.name, run, now)
        if policies.observe_only:
            self._decide(policy, alert, run, "would have", what, detail)
            return
        reason = (
            f"policy {policy.name}: {alert.kind} fired ({alert.annotations.get('summary', '')})"
        )
        command, events = self._book.issue(
            run, step.action, dict(step.args), by=f"policy:{policy.name}", reason=reason,
            alert_id=alert.id, kind=alert.kind, ranks=concerned(alert, step),
        )  # fmt: skip
        detail |= {"command": command.id}
        self._decide(policy, alert, run, "issued", what, detail, also=events)  # one write

    def _detail(self, esc: Escalation, step: PolicyStep, now: float) -> dict[str, object]:
        """What a step's record says; a step that fell due while the collector was down
        says so, and how late it is."""
        detail: dict[str, object] = {
            "step": esc.done + 1, "action": step.action, "args": dict(step.args),
            "started": esc.started,
        }  # fmt: skip
        due = esc.started + step.after_s
        if self._restored_at is not None and due < self._restored_at:
            detail |= {"late_s": round(now - due, 3), "late": "due while the collector was down"}
        return detail

    def _end(self, esc: Escalation, why: str) -> None:
        left = len(esc.policy.steps) - esc.done
        what = f"{esc.policy.name}: escalation ended"
        self._decide(esc.policy, esc.alert, esc.run, "ended", what, {"why": why, "left": left})

    def _decide(
        self,
        policy: Policy,
        alert: LiveAlert,
        run: str,
        result: str,
        what: str,
        detail: dict[str, object],
        also: Sequence[Event] = (),
    ) -> None:
        """Audit a decision; ``also`` (the command it issued) goes in the same write, so a
        crash leaves both stored or neither."""
        record = AuditRecord(
            "policy", f"policy:{policy.name}", what, result, labels={"run": run},
            alert_id=alert.id, kind=alert.kind, detail=detail,
        )  # fmt: skip
        self._write([record.to_event(self._clock()), *also])

    def _write(self, events: list[Event]) -> None:
        try:
            self._record(events)
        except Exception:
            log.exception("could not record %d policy events", len(events))

    # ---- the thread ---------------------------------------------------------------------

    def start(self) -> PolicyEngine:
        self._worker.start()
        return self

    def stop(self) -> None:
        self._worker.stop()
