"""The time-series databases stepwatch feeds and fits into: the names its samples take in
Prometheus' world, its samples forwarded by remote write (Prometheus, VictoriaMetrics) and by
InfluxDB's line protocol, and its rules as a Prometheus rule file."""

from ._forwarder import LINE_PROTOCOL, REMOTE_WRITE, ForwardCounts, Forwarder, Wire
from ._grafana import BOARDS, Query, board_queries, dashboard_json, write_grafana
from ._names import PREFIX, prometheus_label, prometheus_labels, prometheus_name
from ._rule_export import PrometheusRules, export_prometheus
from ._write_request import TimeSeries, compress, write_request

__all__ = [
    "BOARDS",
    "LINE_PROTOCOL",
    "PREFIX",
    "REMOTE_WRITE",
    "ForwardCounts",
    "Forwarder",
    "PrometheusRules",
    "Query",
    "TimeSeries",
    "Wire",
    "board_queries",
    "compress",
    "dashboard_json",
    "export_prometheus",
    "prometheus_label",
    "prometheus_labels",
    "prometheus_name",
    "write_grafana",
    "write_request",
]
