"""stepwatch in Prometheus' world: the names its samples take there, and its rules as a
Prometheus rule file."""

from ._names import PREFIX, prometheus_label, prometheus_labels, prometheus_name
from ._rule_export import PrometheusRules, export_prometheus

__all__ = [
    "PREFIX",
    "PrometheusRules",
    "export_prometheus",
    "prometheus_label",
    "prometheus_labels",
    "prometheus_name",
]
