"""The rule language: YAML in the spirit of Prometheus alerting rules, validated precisely.

    groups:
      - name: training
        rules:
          - alert: loss_spike
            signal: {metric: train.loss, by: [run]}
            detector: {type: robust_z, threshold: 6, direction: up}
            for: 0s
            severity: warning
            annotations:
              summary: "loss {{ $value }} far above its baseline {{ $baseline }}"
            playbook: Skip the batch or lower the learning rate...

A rule reads one signal (a metric with label matchers, or log lines matching
a pattern), decides with a detector or a threshold, and fires after ``for``.
Every mistake is reported as ``file:line: field: what was expected``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ..._log_query import QueryError, parse_query
from ..._regex import compile_regex
from ...config import At, Problems, RuleError, compose, read_config
from ...model import canonical_name, validate_label
from ._rule import (
    SEVERITIES,
    Comparison,
    Detectors,
    LogMatch,
    Rule,
    RuleSet,
    Signal,
    across_members,
)
from ._templates import check_template

__all__ = ["load_rules", "parse_rules"]

_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_THRESHOLD_RE = re.compile(r"^\s*(>=|<=|>|<|==|!=)\s*([-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)\s*$")
_BITS_RE = re.compile(r"^\s*&\s*(0x[0-9a-fA-F]+|\d+)\s*$")

_RULE_KEYS = {
    "alert", "kind", "signal", "detector", "threshold", "for", "keep_firing_for",
    "severity", "labels", "annotations", "playbook",
}  # fmt: skip


def _parameters(factory: Callable[..., Any]) -> set[str]:
    return {
        name
        for name, p in inspect.signature(factory).parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and name != "self"
    }


T = TypeVar("T")
#: A detector's name and the parameters a rule gives it.
DetectorChoice = tuple[str | None, tuple[tuple[str, Any], ...]]


def _optional(
    f: dict[str, At], key: str, read: Callable[[At], T], default: T, problems: Problems
) -> T:
    """``read(f[key])``; ``default`` when the key is absent or wrong (its mistake noted)."""
    return problems.check(read, f[key], default=default) if key in f else default


def _detector(at: At, detectors: Detectors, problems: Problems) -> DetectorChoice:
    if not at.is_mapping:  # a bare name: the detector with its defaults
        name, given = at.text(), {}
    else:
        given = at.mapping(None, {"type"})
        name = given.pop("type").text()
    if name not in detectors:
        raise at.error(f"unknown detector {name!r}; expected one of {', '.join(sorted(detectors))}")
    allowed = _parameters(detectors[name])
    params = []
    for key, value in sorted(given.items()):
        if key not in allowed:
            problems.add(value.error(f"detector {name!r} takes no parameter {key!r}"))
        else:
            default: str | float | bool = ""
            params.append((key, problems.check(value.scalar, default=default)))
    return name, tuple(params)


def _threshold(at: At) -> Comparison:
    if bits := _BITS_RE.match(at.text()):  # any of these bits set: a bitmask such as throttling
        return Comparison("&", float(int(bits.group(1), 0)))
    match = _THRESHOLD_RE.match(at.text())
    if match is None:
        raise at.error(
            f"expected a comparison like '> 80', '< 1e-7' or '& 0x60' (any of these bits), "
            f"got {at.text()!r}"
        )
    return Comparison(match.group(1), float(match.group(2)))


def _log_match(at: At) -> LogMatch:
    fields = at.mapping({"regex", "all", "any", "exclude", "query"})
    regex, exclude = _log_regex(fields.get("regex")), _log_regex(fields.get("exclude"))
    all_ = tuple(fields["all"].str_list()) if "all" in fields else ()
    any_ = tuple(fields["any"].str_list()) if "any" in fields else ()
    query = _log_query(fields["query"]) if "query" in fields else None
    if regex is None and not all_ and not any_ and query is None:
        raise at.error("a log signal needs regex, all, any or query")
    return LogMatch(regex, all_, any_, exclude, query)


def _log_query(at: At) -> str:
    """A bool query as the search API takes it, refused where it is read when it is not one;
    kept as canonical JSON (rules compare equal across reloads)."""
    if not at.is_mapping:
        raise at.error("expected a query in Elasticsearch's form, e.g. {bool: {must: [...]}}")
    try:
        return parse_query(yaml.SafeLoader("").construct_object(at.node, deep=True)).source
    except QueryError as exc:
        raise at.error(str(exc)) from None


def _log_regex(at: At | None) -> str | None:
    """The pattern at ``at`` (if any), refused where it is read when RE2 cannot compile it."""
    if at is None:
        return None
    pattern = at.text()
    try:
        compile_regex(pattern)
    except ValueError as exc:
        raise at.error(str(exc)) from None
    return pattern


def _label_map(at: At) -> tuple[tuple[str, str], ...]:
    out = at.str_map()
    for key, value in out.items():
        try:
            validate_label(key, value)
        except (TypeError, ValueError) as exc:
            raise at.error(str(exc)) from None
    return tuple(sorted(out.items()))


def _label_value(at: At) -> str:
    """One value a matcher accepts: a string (``""`` too) or an integer."""
    value = at.scalar() if not (at.is_mapping or at.is_list) else None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if not isinstance(value, str):
        raise at.error("expected a label value: a string or an integer")
    return value


def _matchers(at: At) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Label matchers: a value or a list of values a label may have (``""``: the series has no
    such label, as in Prometheus), e.g. ``{rank: ["0", ""]}`` for rank 0 or the only process."""
    out = []
    for name, given in at.mapping(None).items():
        values = (
            [_label_value(v) for v in given.items()] if given.is_list else [_label_value(given)]
        )
        if not values:
            raise given.error("expected at least one value")
        try:
            out.append((name, tuple(validate_label(name, value) for value in values)))
        except (TypeError, ValueError) as exc:
            raise given.error(str(exc)) from None
    return tuple(sorted(out))


def _signal(at: At) -> Signal:
    fields = at.mapping({"metric", "log", "match", "by", "divide_by", "where"})
    if ("metric" in fields) == ("log" in fields):
        raise at.error("give exactly one of metric or log")
    divide_by = None
    if "divide_by" in fields:
        if "log" in fields:
            raise fields["divide_by"].error("a log signal has no values to divide")
        try:
            divide_by = canonical_name(fields["divide_by"].text())
        except ValueError as exc:
            raise fields["divide_by"].error(str(exc)) from None
    metrics: tuple[str, ...] = ()
    if "metric" in fields:
        given = fields["metric"]
        names = given.str_list() if given.is_list else [given.text()]
        try:
            metrics = tuple(canonical_name(name) for name in names)
        except ValueError as exc:
            raise given.error(str(exc)) from None
    log = _log_match(fields["log"]) if "log" in fields else None
    match = _matchers(fields["match"]) if "match" in fields else ()
    by = tuple(fields["by"].str_list()) if "by" in fields else ()
    if "where" in fields and "log" in fields:
        raise fields["where"].error("a log signal has no values to compare")
    where = _threshold(fields["where"]) if "where" in fields else None
    return Signal(metrics, log, match, by, divide_by, where)


def _names(f: dict[str, At]) -> tuple[str, str]:
    """The rule's alert name and its kind (the name unless given)."""
    alert = f["alert"].text()
    kind = f["kind"].text() if "kind" in f else alert
    if not _KIND_RE.match(kind):
        raise (f.get("kind") or f["alert"]).error(f"kind {kind!r} must be lower_snake_case")
    return alert, kind


def _severity(at: At) -> str:
    severity = at.text()
    if severity not in SEVERITIES:
        raise at.error(f"expected one of {', '.join(SEVERITIES)}, got {severity!r}")
    return severity


def _annotations(at: At) -> tuple[tuple[str, str], ...]:
    annotations = at.str_map()
    for name, text in annotations.items():
        try:
            check_template(text)
        except ValueError as exc:
            raise at.error(f"{name}: {exc}") from None
    return tuple(sorted(annotations.items()))


def _decision(
    at: At, f: dict[str, At], signal: Signal | None, detectors: Detectors, problems: Problems
) -> tuple[DetectorChoice, Comparison | None]:
    """What decides: a detector with its parameters, or a threshold, checked against the
    signal (when the signal itself is right)."""
    if signal is not None and signal.log is None and ("detector" in f) == ("threshold" in f):
        problems.add(at.error("a metric rule needs exactly one of detector or threshold"))
    if signal is not None and signal.log is not None and ("detector" in f or "threshold" in f):
        problems.add(at.error("a log rule fires on matching lines: no detector or threshold"))
    read = lambda d: _detector(d, detectors, problems)  # noqa: E731
    none: DetectorChoice = (None, ())
    detector, params = _optional(f, "detector", read, none, problems)
    if signal and detector and across_members(detectors[detector]) and not signal.by:
        problems.add(
            f["signal"].error(f"detector {detector!r} compares members: give 'by' (e.g. [rank])")
        )
    return (detector, params), _optional(f, "threshold", _threshold, None, problems)


def _rule(at: At, group: str, detectors: Detectors, problems: Problems) -> Rule | None:
    """One rule; None when it has mistakes, each of them noted in ``problems``."""
    before = len(problems)
    f = at.mapping(_RULE_KEYS, {"alert", "signal"}, problems)
    alert, kind = problems.check(_names, f, default=("", ""))
    signal = problems.check(_signal, f["signal"], default=None)
    (detector, params), threshold = _decision(at, f, signal, detectors, problems)
    for_s, for_samples = _optional(f, "for", At.hold, (0.0, 0), problems)
    rule = Rule(
        group=group,
        alert=alert,
        kind=kind,
        signal=signal or Signal(),
        severity=_optional(f, "severity", _severity, "warning", problems),
        detector=detector,
        params=params,
        threshold=threshold,
        for_s=for_s,
        for_samples=for_samples,
        keep_firing_for_s=_optional(f, "keep_firing_for", At.duration, 0.0, problems),
        labels=_optional(f, "labels", _label_map, (), problems),
        annotations=_optional(f, "annotations", _annotations, (), problems),
        playbook=_optional(f, "playbook", At.text, "", problems),
        line=at.line,
    )
    return rule if len(problems) == before else None


def _entries(at: At, problems: Problems) -> list[At]:
    """The entries of a list; none when it is not one (the mistake noted)."""
    return problems.check(lambda: list(at.items()), default=[])


def _groups(at: At, detectors: Detectors, problems: Problems) -> list[Rule]:
    """The rules of every group; a wrong rule is noted in ``problems`` and left out."""
    rules: list[Rule] = []
    seen: dict[tuple[str, str], int] = {}
    for group_at in _entries(at, problems):
        none: dict[str, At] = {}
        fields = problems.check(
            group_at.mapping, {"name", "rules"}, {"name", "rules"}, default=none
        )
        if not fields:
            continue
        name = problems.check(fields["name"].text, default="")
        for rule_at in _entries(fields["rules"], problems):
            rule = problems.check(_rule, rule_at, name, detectors, problems, default=None)
            if rule is None:
                continue
            if rule.key in seen:
                problems.add(
                    rule_at.error(
                        f"alert {rule.alert!r} is already defined in group {name!r} "
                        f"(line {seen[rule.key]})"
                    )
                )
                continue
            seen[rule.key] = rule.line
            rules.append(rule)
    return rules


def parse_rules(text: str, source: str, detectors: Detectors) -> RuleSet:
    """Validate a rule file's text; the RuleError raised lists every mistake, in line order."""
    # The policy language is act's, and act reads detect's alerts: imported once a file is read.
    from ...act import parse_policies

    root = compose(text, source)
    if root is None:
        raise RuleError(source, None, "", "the file is empty: expected 'groups:'")
    problems = Problems()
    top = At(root, "", source).mapping({"groups", "policies"}, problems=problems)
    if not top and not problems:
        raise RuleError(source, None, "", "expected 'groups:' or 'policies:'")
    rules = _groups(top["groups"], detectors, problems) if "groups" in top else []
    policies = _optional(top, "policies", parse_policies, None, problems)
    problems.raise_any()
    return RuleSet(tuple(rules), policies)


def load_rules(path: str | Path, detectors: Detectors) -> RuleSet:
    """Read and validate one rule file."""
    path = Path(path)
    text = read_config(path)
    return parse_rules(text, str(path), detectors)
