"""The time-series databases stepwatch feeds and fits into: the names its samples take in
Prometheus' world, its samples forwarded by remote write (Prometheus, VictoriaMetrics) and by
InfluxDB's line protocol, and its rules as a Prometheus rule file."""

from ._forwarder import LINE_PROTOCOL, REMOTE_WRITE, ForwardCounts, Forwarder, Wire
from ._names import PREFIX, prometheus_label, prometheus_labels, prometheus_name
from ._rule_export import PrometheusRules, export_prometheus
from ._write_request import TimeSeries, compress, write_request

__all__ = [
    "LINE_PROTOCOL",
    "PREFIX",
    "REMOTE_WRITE",
    "ForwardCounts",
    "Forwarder",
    "PrometheusRules",
    "TimeSeries",
    "Wire",
    "compress",
    "export_prometheus",
    "prometheus_label",
    "prometheus_labels",
    "prometheus_name",
    "write_request",
]
