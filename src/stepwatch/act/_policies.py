"""The ``policies:`` section of a rule file: which alerts steer the training, and how.

    policies:
      observe_only: false          # true: decisions are only audited as "would have"
      max_actions_per_run: 5       # automatic commands per run, all policies together
      rules:
        - name: divergence
          kinds: [loss_divergence]
          cooldown: 10m            # after acting on a run, leave it alone this long
          steps:                   # escalation, each step only while the alert still fires
            - {action: notify}
            - {after: 30s, action: lower_lr, args: {factor: 0.5}}
            - {after: 5m, action: checkpoint}
            - {after: 5m, action: stop, args: {timeout_s: 120}}
        - name: slow_steps
          kinds: [straggler, step_time_regression]
          steps:                   # profile: on the alert's rank, or every rank if it names none
            - {action: profile, args: {steps: 5}}

Mistakes are reported like the rest of the rule file: ``file:line: field: what``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..config import At

__all__ = [
    "COMMAND_ACTIONS",
    "NOTIFY",
    "POLICY_ACTIONS",
    "RANK_ACTIONS",
    "Policies",
    "Policy",
    "PolicyStep",
    "command_args",
    "command_ranks",
    "parse_policies",
]

#: What a run can be told to do, and each command's arguments with their defaults.
COMMAND_ACTIONS: dict[str, dict[str, float]] = {
    "lower_lr": {"factor": 0.5},
    "checkpoint": {},
    "skip_step": {"steps": 100.0},
    "rollback": {},
    "stop": {"timeout_s": 300.0},
    "profile": {"steps": 5.0},
}
#: Commands a rank applies on its own, so they may name the ranks they are for; the others
#: change what every rank shares (the weights, the rate, the loop), so every rank applies them.
RANK_ACTIONS = frozenset({"profile"})
#: A policy step that only tells people (the notifiers subscribe to alerts themselves).
NOTIFY = "notify"
POLICY_ACTIONS = (NOTIFY, *COMMAND_ACTIONS)
DEFAULT_MAX_ACTIONS = 5
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _number(action: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{action}: {name} must be a number, got {value!r}")
    return float(value)


def command_args(action: str, given: Mapping[str, object] | None = None) -> dict[str, float]:
    """The arguments of command ``action`` with defaults filled in; ValueError when wrong."""
    if action not in COMMAND_ACTIONS:
        raise ValueError(f"unknown action {action!r}; expected one of {', '.join(COMMAND_ACTIONS)}")
    defaults = COMMAND_ACTIONS[action]
    unknown = sorted(set(given or {}) - defaults.keys())
    if unknown:
        takes = ", ".join(defaults) or "no arguments"
        raise ValueError(f"{action} takes {takes}, not {unknown[0]!r}")
    args = {**defaults, **{k: _number(action, k, v) for k, v in (given or {}).items()}}
    if "factor" in args and not 0.0 < args["factor"] < 1.0:
        raise ValueError(f"lower_lr: factor must be between 0 and 1, got {args['factor']:g}")
    if "steps" in args and (args["steps"] < 1 or args["steps"] != int(args["steps"])):
        raise ValueError(f"skip_step: steps must be a whole number >= 1, got {args['steps']:g}")
    if "timeout_s" in args and args["timeout_s"] <= 0:
        raise ValueError(f"stop: timeout_s must be > 0, got {args['timeout_s']:g}")
    return args


def command_ranks(action: str, ranks: Iterable[object] = ()) -> tuple[int, ...]:
    """The ranks a command names, sorted and once each (none: every rank); ValueError when
    one is not a rank number or ``action`` is not one a rank applies on its own."""
    chosen = set()
    for rank in ranks:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"{action}: a rank is a whole number >= 0, not {rank!r}")
        chosen.add(rank)
    if chosen and action not in RANK_ACTIONS:
        raise ValueError(f"{action} is applied by every rank: it takes no ranks")
    return tuple(sorted(chosen))


@dataclass(frozen=True, slots=True)
class PolicyStep:
    """Do ``action`` (with ``args``) ``after_s`` seconds into the alert, if it still fires."""

    after_s: float
    action: str
    args: tuple[tuple[str, float], ...] = ()

    @property
    def is_command(self) -> bool:
        return self.action in COMMAND_ACTIONS


@dataclass(frozen=True, slots=True)
class Policy:
    """Alerts of ``kinds`` (kind or rule name) on a run escalate through ``steps``."""

    name: str
    kinds: tuple[str, ...]
    steps: tuple[PolicyStep, ...]
    cooldown_s: float = 0.0
    line: int = 0


@dataclass(frozen=True, slots=True)
class Policies:
    """The policy section of the rule files: its rules and the global limits."""

    rules: tuple[Policy, ...] = ()
    observe_only: bool = False
    max_actions_per_run: int = DEFAULT_MAX_ACTIONS

    def matching(self, kind: str, rule: str) -> list[Policy]:
        return [p for p in self.rules if kind in p.kinds or rule in p.kinds]


def _flag(at: At) -> bool:
    value = at.scalar()
    if not isinstance(value, bool):
        raise at.error(f"expected true or false, got {value!r}")
    return value


def _step(at: At, previous_s: float) -> PolicyStep:
    f = at.mapping({"after", "action", "args"}, {"action"})
    action = f["action"].text()
    if action not in POLICY_ACTIONS:
        raise f["action"].error(
            f"unknown action {action!r}; expected one of {', '.join(POLICY_ACTIONS)}"
        )
    after_s = f["after"].duration() if "after" in f else 0.0
    if after_s < previous_s:
        raise f["after"].error(
            f"steps escalate in order: {after_s:g}s comes before the previous {previous_s:g}s"
        )
    args: dict[str, float] = {}
    if action == NOTIFY:
        if "args" in f:
            raise f["args"].error("notify takes no arguments")
    else:
        given = {k: v.scalar() for k, v in f["args"].mapping(None).items()} if "args" in f else {}
        try:
            args = command_args(action, given)
        except ValueError as exc:
            raise (f.get("args") or f["action"]).error(str(exc)) from None
    return PolicyStep(after_s, action, tuple(sorted(args.items())))


def _policy(at: At) -> Policy:
    f = at.mapping({"name", "kinds", "cooldown", "steps"}, {"name", "kinds", "steps"})
    name = f["name"].text()
    if not _NAME_RE.match(name):
        raise f["name"].error(f"name {name!r} must be lower_snake_case")
    kinds = f["kinds"].str_list() if f["kinds"].is_list else [f["kinds"].text()]
    if not kinds:
        raise f["kinds"].error("give at least one alert kind")
    steps: list[PolicyStep] = []
    for step_at in f["steps"].items():
        steps.append(_step(step_at, steps[-1].after_s if steps else 0.0))
    if not steps:
        raise f["steps"].error("give at least one step")
    cooldown_s = f["cooldown"].duration() if "cooldown" in f else 0.0
    return Policy(name, tuple(kinds), tuple(steps), cooldown_s, at.line)


def parse_policies(at: At) -> Policies:
    """Validate the ``policies:`` section; RuleError at the first mistake."""
    f = at.mapping({"observe_only", "max_actions_per_run", "rules"})
    rules: list[Policy] = []
    seen: dict[str, int] = {}
    for policy_at in f["rules"].items() if "rules" in f else ():
        policy = _policy(policy_at)
        if policy.name in seen:
            raise policy_at.error(
                f"policy {policy.name!r} is already defined (line {seen[policy.name]})"
            )
        seen[policy.name] = policy.line
        rules.append(policy)
    most = DEFAULT_MAX_ACTIONS
    if "max_actions_per_run" in f:
        value = f["max_actions_per_run"].number()
        if value < 0 or value != int(value):
            raise f["max_actions_per_run"].error(f"expected a whole number >= 0, got {value:g}")
        most = int(value)
    observe = _flag(f["observe_only"]) if "observe_only" in f else False
    return Policies(tuple(rules), observe, most)
