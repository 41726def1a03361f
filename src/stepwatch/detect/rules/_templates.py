"""Annotation templates in the Prometheus spelling: ``{{ $labels.node }}``, ``{{ $value }}``.

Checked when a rule file is loaded (an unknown variable is an error there,
not a blank in a 3 a.m. message), rendered when an alert fires.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

__all__ = ["VARIABLES", "check_template", "render"]

_FIELD_RE = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_VAR_RE = re.compile(r"^\$(labels\.([A-Za-z_][A-Za-z0-9_]*)|([a-z_]+))(\s*\|\s*(humanize))?$")

#: What a template may name besides ``$labels.<name>``.
VARIABLES = {
    "value": "the value that made the rule fire",
    "baseline": "the detector's baseline for that value (when it has one)",
    "since": "when the condition began (UTC)",
    "kind": "the anomaly kind",
    "severity": "the rule's severity",
    "predicted": "when a forecast expects its target to be reached (UTC; empty without one)",
    "eta": 'how long until then, as "~12 min" (empty without a forecast)',
}


def check_template(template: str) -> None:
    """Raise ValueError naming the first placeholder that cannot be rendered."""
    for match in _FIELD_RE.finditer(template):
        var = _VAR_RE.match(match.group(1))
        if var is None or (var.group(3) is not None and var.group(3) not in VARIABLES):
            known = ", ".join(f"${name}" for name in VARIABLES)
            raise ValueError(
                f"unknown template field {match.group(0)!r}: use $labels.<name> or one of {known}"
            )


def _humanize(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.4g}"


def _show(value: object, humanize: bool) -> str:
    if isinstance(value, float):
        return _humanize(value) if humanize else f"{value:.6g}"
    return "" if value is None else str(value)


def render(template: str, labels: Mapping[str, str], values: Mapping[str, object]) -> str:
    """Fill a checked template; a label the alert does not have renders empty."""

    def field(match: re.Match[str]) -> str:
        var = _VAR_RE.match(match.group(1))
        if var is None:
            return match.group(0)
        humanize = var.group(5) is not None
        if var.group(2) is not None:
            return labels.get(var.group(2), "")
        return _show(values.get(var.group(3)), humanize)

    return _FIELD_RE.sub(field, template)
