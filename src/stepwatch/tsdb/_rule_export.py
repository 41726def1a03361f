"""Rules as a Prometheus rule file, over the names stepwatch's samples take there (remote write):
for teams whose alerting runs on Prometheus and Alertmanager, the same pack, where PromQL can
say it.

Thresholds (with ``for``), ratios (``divide_by``), the share of a window a condition held,
non-finite values, missing data and trend lines translate. Where PromQL says less than the
detector (``predict_linear`` on the plain samples for a trend line through each minute's
peak, its pauses and jumps), the rule is exported and listed as approximated. The robust
statistics over a run's history (IQR, robust z, CUSUM, rises, plateaus), comparisons of a
rank with its peers at each step, holds counted in samples and log rules are listed as not
exported, each with the reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..detect import Comparison, Rule, RuleSet
from ._names import prometheus_label, prometheus_name

__all__ = ["PrometheusRules", "export_prometheus"]

#: stepwatch's template variables that Prometheus' alert templates lack, and what stands in
#: for each ({horizon}: the forecast's horizon).
_STAND_INS = {
    "since": "its start",
    "baseline": "its usual level",
    "eta": "under {horizon}",
    "predicted": "within {horizon}",
}
_FIELD_RE = re.compile(r"\{\{\s*\$([a-z_]+)(\s*\|\s*humanize)?\s*\}\}")
#: The aggregation that keeps an entity's worst series, by the way its comparison points.
_WORST = {">": "max", ">=": "max", "<": "min", "<=": "min", "==": "max", "!=": "max"}


class _Inexpressible(Exception):
    """A rule PromQL cannot say; the message says why."""


@dataclass
class PrometheusRules:
    """A Prometheus rule file's groups, and the rules left out or approximated (alert name
    and why)."""

    groups: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    approximated: list[tuple[str, str]] = field(default_factory=list)

    def to_yaml(self) -> str:
        """The rule file, its header saying what it left out and what it approximates."""
        lines = ["# Exported by stepwatch rules export --format prometheus."]
        for title, rows in (("Approximated", self.approximated), ("Not exported", self.skipped)):
            if rows:
                lines.append(f"# {title}:")
                lines += [f"#   {alert}: {why}" for alert, why in rows]
        body = yaml.safe_dump({"groups": self.groups}, sort_keys=False, allow_unicode=True)
        return "\n".join(lines) + "\n" + body


def export_prometheus(rules: RuleSet) -> PrometheusRules:
    """The rules of ``rules`` in Prometheus' rule file form, group by group."""
    out = PrometheusRules()
    groups: dict[str, list[dict[str, Any]]] = {}
    for rule in rules.rules:
        try:
            expr, note = _expr(rule)
        except _Inexpressible as why:
            out.skipped.append((rule.alert, str(why)))
            continue
        if note:
            out.approximated.append((rule.alert, note))
        groups.setdefault(rule.group, []).append(_alerting(rule, expr))
    out.groups = [
        {"name": f"stepwatch_{name}", "rules": entries} for name, entries in groups.items()
    ]
    return out


def _alerting(rule: Rule, expr: str) -> dict[str, Any]:
    """The alerting rule: its expression, hold, labels and annotations."""
    entry: dict[str, Any] = {"alert": rule.alert, "expr": expr}
    if rule.for_s:
        entry["for"] = _duration(rule.for_s)
    if rule.keep_firing_for_s:
        entry["keep_firing_for"] = _duration(rule.keep_firing_for_s)
    entry["labels"] = {"severity": rule.severity, "kind": rule.kind, **dict(rule.labels)}
    horizon = dict(rule.params).get("horizon_s")
    annotations = {k: _template(v, rule, horizon) for k, v in rule.annotations}
    if rule.playbook:
        annotations["playbook"] = rule.playbook
    entry["annotations"] = annotations
    return entry


def _template(text: str, rule: Rule, horizon: Any) -> str:
    """An annotation in Prometheus' templates: stepwatch's own variables replaced."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in ("value", "labels"):
            return match.group(0)
        if name in ("kind", "severity"):
            return str(getattr(rule, name))
        spelled = _duration(float(horizon)) if isinstance(horizon, int | float) else "its horizon"
        return _STAND_INS.get(name, name).format(horizon=spelled)

    return _FIELD_RE.sub(one, text)


def _duration(seconds: float) -> str:
    """A duration in Prometheus' spelling, in the largest unit that divides it."""
    whole = max(1, round(seconds))
    for unit, size in (("h", 3600), ("m", 60)):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _expr(rule: Rule) -> tuple[str, str | None]:
    """The rule's PromQL and, where it only approximates the detector, how."""
    if rule.signal.log is not None:
        raise _Inexpressible("a log rule: log lines are not samples in Prometheus")
    translate = None if rule.detector is None else _DETECTORS.get(rule.detector)
    if rule.detector is not None and translate is None:
        raise _Inexpressible(_WHY_NOT.get(rule.detector, f"the {rule.detector} detector"))
    if rule.for_samples:
        raise _Inexpressible(
            f"holds for {rule.for_samples} samples: Prometheus holds for a time, not a count"
        )
    if translate is None:
        assert rule.threshold is not None, "a rule without a detector has a threshold"
        return _threshold(rule, rule.threshold), None
    return translate(rule, dict(rule.params))


def _selector(metric: str, rule: Rule) -> str:
    """The series of ``metric`` that the rule's ``match`` keeps."""
    matchers = [
        f'{prometheus_label(label)}=~"{"|".join(re.escape(v) for v in values)}"'
        for label, values in rule.signal.match
    ]
    return prometheus_name(metric) + ("{" + ", ".join(matchers) + "}" if matchers else "")


def _by(rule: Rule) -> str:
    return "by (" + ", ".join(prometheus_label(b) for b in rule.signal.by) + ")"


def _value(rule: Rule, worst: str) -> str:
    """The rule's value per entity (its ``by`` labels): the worst of its series, over the
    entity's ``divide_by`` where it has one, its ``where`` applied first."""
    signal = rule.signal
    if len(signal.metrics) != 1:
        raise _Inexpressible("reads several metrics as one signal")
    series = _selector(signal.metrics[0], rule)
    if signal.where is not None:
        series = f"{series} {signal.where.op} {_number(signal.where.level)}"
    value = f"{worst} {_by(rule)} ({series})"
    if signal.divide_by is not None:
        value = f"{value} / {worst} {_by(rule)} ({_selector(signal.divide_by, rule)})"
    return value


def _threshold(rule: Rule, threshold: Comparison) -> str:
    if threshold.op == "&":
        return _bits(rule, int(threshold.level))
    value = _value(rule, _WORST[threshold.op])
    return f"{value} {threshold.op} {_number(threshold.level)}"


def _bits(rule: Rule, mask: int) -> str:
    """Any of ``mask``'s bits set: PromQL has no bitwise and, so a test per bit."""
    series = _selector(rule.signal.metrics[0], rule)
    bits = [k for k in range(mask.bit_length()) if mask >> k & 1]
    tests = [f"max {_by(rule)} (floor({series} / {2**k}) % 2 == 1)" for k in bits]
    return " or ".join(tests)


def _nonfinite(rule: Rule, params: Mapping[str, Any]) -> tuple[str, str | None]:
    series = _selector(rule.signal.metrics[0], rule)
    return f"count {_by(rule)} (({series} != {series}) or (abs({series}) == +Inf)) > 0", None


def _share(rule: Rule, params: Mapping[str, Any]) -> tuple[str, str | None]:
    """The condition held for at least ``share`` of the last ``window_s``."""
    op, level = str(params["op"]), float(params["level"])
    held = f"{_value(rule, _WORST[op])} {op} bool {_number(level)}"
    window = _duration(float(params["window_s"]))
    return f"avg_over_time(({held})[{window}:]) >= {_number(float(params['share']))}", None


def _trend(rule: Rule, params: Mapping[str, Any]) -> tuple[str, str | None]:
    """A line over about three half-lives: ``predict_linear`` to a target within a horizon,
    or ``deriv`` as a share of the level an hour."""
    up = params.get("direction", "up") == "up"
    span = _duration(3 * float(params.get("halflife_s", 1800.0)))
    notes = ["a least-squares line over the last three half-lives, not a weighted one"]
    peak = params.get("peak_s")
    if peak is not None:
        step = _duration(float(peak))
        kind = "max" if up else "min"
        peaks = f"{kind}_over_time({_selector(rule.signal.metrics[0], rule)}[{step}])"
        series = f"{kind} {_by(rule)} ({peaks})"
        if rule.signal.divide_by is not None:
            series += f" / max {_by(rule)} ({_selector(rule.signal.divide_by, rule)})"
        ranged = f"({series})[{span}:{step}]"
        left_out = [n for n in ("pause_s", "level_jumps") if params.get(n)]
        notes.append(
            "through each minute's peak"
            + (", with no " + " or ".join(left_out) if left_out else "")
        )
    else:
        ranged = f"({_value(rule, 'max' if up else 'min')})[{span}:]"
    if "target" in params and "horizon_s" in params:
        horizon = float(params["horizon_s"])
        op = ">=" if up else "<="
        expr = (
            f"predict_linear({ranged}, {_number(horizon)}) {op} {_number(float(params['target']))}"
        )
    else:
        threshold = float(params.get("threshold_pct_per_h", 5.0))
        level = f"avg_over_time({ranged})"
        rate = f"deriv({ranged}) * 3600 / {level} * 100"
        expr = f"{rate} >= {_number(threshold)}" if up else f"{rate} <= {_number(-threshold)}"
    return expr, "; ".join(notes)


def _absence(rule: Rule, params: Mapping[str, Any]) -> tuple[str, str | None]:
    """Entities seen within the hour with no sample of any of the metrics for ``timeout_s``."""
    names = "|".join(re.escape(prometheus_name(m)) for m in rule.signal.metrics)
    series = f'{{__name__=~"{names}"}}'
    timeout = _duration(float(params.get("timeout_s", 60.0)))
    seen = f"max {_by(rule)} (count_over_time({series}[1h]))"
    recent = f"max {_by(rule)} (count_over_time({series}[{timeout}]))"
    return f"{seen} unless {recent}", "an entity is known from its samples of the last hour"


def _number(value: float) -> str:
    """A float as PromQL reads it."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


Translate = Callable[[Rule, Mapping[str, Any]], tuple[str, str | None]]
_DETECTORS: dict[str, Translate] = {
    "nonfinite": _nonfinite,
    "share": _share,
    "trend": _trend,
    "absence": _absence,
}
_WHY_NOT = {
    "iqr": "an IQR fence over the run's recent values, detrended: no PromQL function",
    "robust_z": "a robust z-score against a decaying median and MAD: no PromQL function",
    "cusum": "a CUSUM of shifts from a learnt level: PromQL keeps no state between evaluations",
    "rise": "a rise from the run's best smoothed value: PromQL keeps no state between evaluations",
    "plateau": "a loss whose fall stopped, against its own earlier fall: no PromQL function",
    "peers": "each member against its peers at the same step: Prometheus matches series by "
    "time, not by step",
}
