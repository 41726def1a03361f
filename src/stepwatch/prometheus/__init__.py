"""stepwatch in Prometheus' world: the names its samples take there, its samples forwarded by
remote write, and its rules as a Prometheus rule file."""

from ._names import PREFIX, prometheus_label, prometheus_labels, prometheus_name
from ._remote_write import RemoteWriteCounts, RemoteWriter
from ._rule_export import PrometheusRules, export_prometheus
from ._write_request import TimeSeries, compress, write_request

__all__ = [
    "PREFIX",
    "PrometheusRules",
    "RemoteWriteCounts",
    "RemoteWriter",
    "TimeSeries",
    "compress",
    "export_prometheus",
    "prometheus_label",
    "prometheus_labels",
    "prometheus_name",
    "write_request",
]
