"""The names stepwatch's metrics and labels take in Prometheus' world (remote write, exported
rules, Grafana boards): ``stepwatch_`` and the vocabulary name with its dots as underscores
and its unit spelled out as Prometheus' conventions ask (``gpu.temp_c`` is
``stepwatch_gpu_temp_celsius``, ``train.step_time_s`` ``stepwatch_train_step_time_seconds``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["PREFIX", "prometheus_label", "prometheus_labels", "prometheus_name"]

PREFIX = "stepwatch_"
#: The vocabulary's short units at the end of a name, and Prometheus' base units.
_UNITS = (("_per_s", "_per_second"), ("_pct", "_percent"), ("_c", "_celsius"),
          ("_s", "_seconds"), ("_w", "_watts"))  # fmt: skip
_INVALID = re.compile(r"[^A-Za-z0-9_:]")
_INVALID_LABEL = re.compile(r"[^A-Za-z0-9_]")


def prometheus_name(metric: str) -> str:
    """The Prometheus name of a vocabulary (or user) metric name."""
    name = metric.removeprefix("stepwatch.")
    for short, unit in _UNITS:
        if name.endswith(short):
            name = name[: -len(short)] + unit
            break
    return PREFIX + _INVALID.sub("_", name)


def prometheus_label(name: str) -> str:
    """A label name as Prometheus allows it (names it reserves, ``__…``, are kept apart)."""
    label = _INVALID_LABEL.sub("_", name)
    if label[:1].isdigit():
        label = "_" + label
    return "label" + label if label.startswith("__") else label


def prometheus_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Labels as Prometheus allows their names."""
    return {prometheus_label(k): v for k, v in labels.items()}
