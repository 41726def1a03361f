"""What the policy engine knows, as a checkpoint: the escalations under way, those already
worked through, when each policy last acted on each run and how many automatic commands each
run had; and how the audit trail since a checkpoint brings that up to date, so a step taken
after the checkpoint is not taken again."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..detect import LiveAlert
from ._audit import AuditRecord
from ._policies import Policies, Policy
from ._state import alert_of, decode, encode, malformed

__all__ = ["Escalation", "Past", "PolicyState"]

log = logging.getLogger("stepwatch.act")

FORMAT = 1
PART = "policy"
#: Escalations remembered after their end, so a transition handed over again starts nothing.
MAX_PAST = 2_000
#: The results of a step that spent one of the run's automatic commands.
SPENT = ("issued", "would have")
ACTOR = "policy:"

Key = tuple[str, str]  # (policy, alert id)


@dataclass(slots=True)
class Escalation:
    """One policy working through its steps for one firing alert."""

    policy: Policy
    alert: LiveAlert
    run: str
    started: float
    done: int = 0  # steps taken so far


@dataclass(slots=True)
class Past:
    """An escalation known only by its record: steps taken, its start; ``over`` once ended."""

    run: str
    started: float
    done: int
    over: bool = False


@dataclass
class PolicyState:
    """The engine's memory (the engine holds the lock)."""

    active: dict[Key, Escalation] = field(default_factory=dict)
    past: dict[Key, Past] = field(default_factory=dict)
    acted: dict[tuple[str, str], float] = field(default_factory=dict)  # (policy, run) -> ts
    actions: dict[str, int] = field(default_factory=dict)  # run -> automatic commands

    def spend(self, policy: str, run: str, at: float) -> None:
        """A command step taken (or, observing only, that would have been)."""
        self.actions[run] = self.actions.get(run, 0) + 1
        self.acted[(policy, run)] = at

    def remember(self, key: Key, past: Past) -> None:
        self.past.pop(key, None)
        self.past[key] = past
        while len(self.past) > MAX_PAST:
            del self.past[next(iter(self.past))]

    def finish(self, key: Key) -> None:
        """The escalation is over (all steps taken, or its alert ended)."""
        esc = self.active.pop(key)
        self.remember(key, Past(esc.run, esc.started, esc.done, over=True))

    # ---- the checkpoint -----------------------------------------------------------------

    def body(self, taken: float) -> dict[str, Any]:
        """A copy of the state, in the checkpoint's form (``encode`` it without the lock)."""
        active = [
            {"policy": k[0], "run": e.run, "started": e.started, "done": e.done,
             "alert": e.alert.as_json()}
            for k, e in self.active.items()
        ]  # fmt: skip
        past = [[k[0], k[1], p.run, p.started, p.done, p.over] for k, p in self.past.items()]
        acted = [[policy, run, ts] for (policy, run), ts in self.acted.items()]
        body = {"taken": taken, "active": active, "past": past, "acted": acted}
        return body | {"actions": dict(self.actions)}

    @staticmethod
    def encode(body: dict[str, Any]) -> bytes:
        return encode(FORMAT, body)

    @classmethod
    def decode(cls, state: bytes, policies: Policies | None) -> tuple[PolicyState, float]:
        """The state of a checkpoint and when it was taken; ValueError for one it cannot read.
        An escalation of a policy the rules no longer have is dropped (logged)."""
        data = decode(state, FORMAT, PART)
        named = {p.name: p for p in (policies.rules if policies else ())}
        out = cls()
        with malformed(PART):
            for e in data["active"]:
                esc = _escalation(e, named)
                if esc is not None:
                    out.active[(esc.policy.name, esc.alert.id)] = esc
            for name, alert_id, run, started, done, over in data["past"]:
                out.past[(str(name), str(alert_id))] = Past(
                    str(run), float(started), int(done), bool(over)
                )
            out.acted = {(str(p), str(r)): float(ts) for p, r, ts in data["acted"]}
            out.actions = {str(run): int(n) for run, n in dict(data["actions"]).items()}
            return out, float(data["taken"])

    def catch_up(self, records: Sequence[tuple[float, AuditRecord]]) -> None:
        """Apply the policy decisions recorded since the checkpoint (oldest first): an
        escalation begun keeps its start, steps taken and budgets spent stay taken and spent,
        an escalation that ended stays over."""
        for ts, record in records:
            if record.actor.startswith(ACTOR):
                key = (record.actor.removeprefix(ACTOR), record.alert_id)
                self._apply(key, record, record.labels.get("run", ""), ts)

    def _apply(self, key: Key, record: AuditRecord, run: str, ts: float) -> None:
        esc, past = self.active.get(key), self.past.get(key)
        started = float(record.detail.get("started", ts))
        if record.result == "ended":
            if esc is not None:
                self.finish(key)
            elif past is None or not past.over:
                self.remember(key, Past(run, ts, past.done if past else 0, over=True))
            return
        if record.result == "begun":
            if esc is None and past is None:
                self.remember(key, Past(run, started, 0))
            return
        step = record.detail.get("step")
        known = esc.done if esc is not None else past.done if past is not None else 0
        if not isinstance(step, int) or step <= known:
            return  # a cool-down skip (no step), or a step the checkpoint has
        if record.result in SPENT:
            self.spend(key[0], run, ts)
        if esc is None:
            self.remember(key, Past(run, started, step, past.over if past else False))
            return
        esc.done = step
        if step >= len(esc.policy.steps):
            self.finish(key)


def _escalation(data: dict[str, Any], named: dict[str, Policy]) -> Escalation | None:
    alert = alert_of(data["alert"])
    policy = named.get(str(data["policy"]))
    if policy is None:
        log.warning("policy %s is gone: its escalation of %s ends", data["policy"], alert.id)
        return None
    return Escalation(policy, alert, str(data["run"]), float(data["started"]), int(data["done"]))
