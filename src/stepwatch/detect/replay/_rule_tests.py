"""Rule unit tests in the spirit of ``promtool test rules``: input series, expected alerts.

rule_files: [rules.yaml]          # relative to this file; none: the built-in pack
interval: 10s                     # spacing of input values (default 1m)
tests:
  - name: a hot GPU fires after 5 minutes
    input_series:
      - series: 'gpu.temp_c{run="r", node="n1", gpu="0"}'
        values: "60x5 85x40"      # a+bxn: n+1 values from a by b; _ is a missing value
    input_logs:
      - {at: 3m, line: "CUDA out of memory", labels: {run: r, node: n1}}
    alert_rule_test:
      - eval_time: 10m
        alertname: gpu_hot
        exp_alerts:
          - exp_labels: {run: r, node: n1, gpu: "0"}
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...config import At, RuleError, compose, read_config
from ...model import NO_STEP, Event, SampleBatch, SeriesKey
from ..engine import Alert, AlertState, Engine
from ..rules import RuleSet, load_rules

__all__ = ["RuleTestResult", "run_rule_tests"]

_SERIES_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.:/-]*)\s*(?:\{(.*)\})?\s*$")
_LABEL_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_TERM_RE = re.compile(
    r"^(_|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|NaN|Inf|[-+]Inf))(?:([-+]\d+\.?\d*(?:[eE][-+]?\d+)?)?x(\d+))?$"
)  # noqa: E501
#: Data time of a test's first input value (any fixed epoch would do).
EPOCH = 1_700_000_000.0


@dataclass(frozen=True, slots=True)
class RuleTestResult:
    """One test case: its name and the failures found (empty when it passed)."""

    name: str
    failures: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.failures


def _series_key(at: At) -> SeriesKey:
    match = _SERIES_RE.match(at.text())
    if match is None:
        raise at.error(f'expected name{{label="value", ...}}, got {at.text()!r}')
    body, labels, pos = match.group(2) or "", {}, 0
    while pos < len(body):
        label = _LABEL_RE.match(body, pos)
        if label is None:
            raise at.error(f'bad label list {{{body}}}: expected label="value" pairs')
        labels[label.group(1)] = label.group(2)
        pos = label.end()
    try:
        return SeriesKey.of(match.group(1), labels)
    except (TypeError, ValueError) as exc:
        raise at.error(str(exc)) from None


def _values(at: At) -> list[float | None]:
    """Expand ``1 2 _ 5+1x3 NaN`` (None: no sample at that point)."""
    out: list[float | None] = []
    for term in str(at.node.value).split():
        match = _TERM_RE.match(term)
        if match is None:
            raise at.error(f"bad value {term!r}: use numbers, _ (missing), a+bxn or axn")
        start, delta, count = match.group(1), match.group(2), match.group(3)
        if start == "_":
            out += [None] * (int(count) if count else 1)
            continue
        first, step = float(start), float(delta or 0.0)
        n = int(count) + 1 if count else 1
        out += [first + i * step for i in range(n)]
    return out


def _inputs(test: Mapping[str, At], interval: float) -> SampleBatch:
    keys: list[SeriesKey] = []
    cols: list[tuple[int, float, float]] = []
    for item in test["input_series"].items() if "input_series" in test else []:
        fields = item.mapping({"series", "values"}, {"series", "values"})
        keys.append(_series_key(fields["series"]))
        for i, value in enumerate(_values(fields["values"])):
            if value is not None:
                cols.append((len(keys) - 1, EPOCH + i * interval, value))
    cols.sort(key=lambda c: c[1])
    events = []
    for item in test["input_logs"].items() if "input_logs" in test else []:
        fields = item.mapping({"at", "line", "labels"}, {"at", "line"})
        labels = fields["labels"].str_map() if "labels" in fields else {}
        events.append(Event(EPOCH + fields["at"].duration(), "log", fields["line"].text(), labels))
    events.sort(key=lambda e: e.ts)
    return SampleBatch(
        "rule-test",
        0,
        keys,
        np.array([c[0] for c in cols], np.uint32),
        np.array([c[1] for c in cols], np.float64),
        np.full(len(cols), NO_STEP, np.int64),
        np.array([c[2] for c in cols], np.float64),
        events,
    )


def _firing_at(alerts: list[Alert], name: str, when: float) -> list[dict[str, str]]:
    """Labels of the ``name`` alerts firing at data time ``when``."""
    state: dict[tuple[tuple[str, str], ...], str] = {}
    for alert in alerts:
        if alert.rule.alert == name and alert.ts <= when:
            state[tuple(sorted(alert.labels.items()))] = alert.state
    return [dict(k) for k, s in state.items() if s == AlertState.FIRING]


def _case(
    test: At, rules: RuleSet, interval: float, detectors: Mapping[str, Any]
) -> RuleTestResult:
    fields = test.mapping(
        {"name", "interval", "input_series", "input_logs", "alert_rule_test"}, {"alert_rule_test"}
    )
    name = fields["name"].text() if "name" in fields else f"test at line {test.line}"
    if "interval" in fields:
        interval = fields["interval"].duration()
    alerts = Engine(rules, detectors).process(_inputs(fields, interval))
    known = {rule.alert for rule in rules.rules}
    failures = []
    for check in fields["alert_rule_test"].items():
        c = check.mapping({"eval_time", "alertname", "exp_alerts"}, {"eval_time", "alertname"})
        alertname, when = c["alertname"].text(), c["eval_time"].duration()
        if alertname not in known:
            raise c["alertname"].error(f"no rule named {alertname!r} in the rule files")
        expected = [
            e.mapping({"exp_labels"}, {"exp_labels"})["exp_labels"].str_map()
            for e in (c["exp_alerts"].items() if "exp_alerts" in c else [])
        ]
        got = _firing_at(alerts, alertname, EPOCH + when)
        if sorted(map(sorted, map(dict.items, got))) != sorted(
            map(sorted, map(dict.items, expected))
        ):
            failures.append(
                f"{alertname} at {c['eval_time'].node.value}: expected {expected or 'no alert'}, "
                f"got {got or 'no alert'}"
            )
    return RuleTestResult(name, tuple(failures))


def run_rule_tests(
    path: str | Path, detectors: Mapping[str, Any], builtin: Callable[[], RuleSet]
) -> list[RuleTestResult]:
    """Run every test case of one test file; a malformed file raises RuleError."""
    path = Path(path)
    text = read_config(path)
    root = compose(text, str(path))
    if root is None:
        raise RuleError(str(path), None, "", "the file is empty: expected 'tests:'")
    top = At(root, "", str(path)).mapping({"rule_files", "interval", "tests"}, {"tests"})
    if "rule_files" in top:
        files = [path.parent / f for f in top["rule_files"].str_list()]
        rules = RuleSet(tuple(r for f in files for r in load_rules(f, detectors).rules))
    else:
        rules = builtin()
    interval = top["interval"].duration() if "interval" in top else 60.0
    if not math.isfinite(interval) or interval <= 0:
        raise top["interval"].error("the interval must be > 0")
    return [_case(test, rules, interval, detectors) for test in top["tests"].items()]
