"""Grafana boards over the samples stepwatch forwards to a Prometheus-compatible store (remote
write): the overview of a run, its hardware, its step time (P50/P90/P99 across ranks) and its
ranks' synchronisation, each with the data source, run and node as variables; and the
provisioning file that loads them. Built with grafana-foundation-sdk's typed builders, so a
board is what Grafana's own schema says it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard as board
from grafana_foundation_sdk.builders import heatmap, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from ._names import prometheus_name

__all__ = ["BOARDS", "Query", "board_queries", "dashboard_json", "write_grafana"]

#: The Prometheus data source the boards read, chosen by the ``datasource`` variable.
_SOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
_RUN = 'run=~"$run"'
_NODE = 'node=~"$node"'


@dataclass(frozen=True, slots=True)
class Query:
    """A panel's query: its PromQL and the legend of each series."""

    expr: str
    legend: str


@dataclass(frozen=True, slots=True)
class Chart:
    """A time-series panel (or a heatmap): title, unit, queries."""

    title: str
    unit: str
    queries: tuple[Query, ...]
    heatmap: bool = False


def _m(metric: str, *matchers: str) -> str:
    return f"{prometheus_name(metric)}{{{', '.join(matchers)}}}"


def _per_run(how: str, metric: str) -> Query:
    return Query(f"{how} by (run) ({_m(metric, _RUN)})", "{{run}}")


def _quantile(q: float, metric: str) -> Query:
    return Query(f"quantile by (run) ({q}, {_m(metric, _RUN)})", f"{{{{run}}}} p{round(q * 100)}")


#: Each board's uid, title and panels.
BOARDS: dict[str, tuple[str, tuple[Chart, ...]]] = {
    "stepwatch-overview": ("stepwatch: runs", (
        Chart("Training loss", "none", (_per_run("avg", "train.loss"),)),
        Chart("Learning rate", "none", (_per_run("avg", "train.lr"),)),
        Chart("Gradient norm", "none", (_per_run("max", "train.grad_norm"),)),
        Chart("Tokens per second", "short", (_per_run("sum", "train.tokens_per_s"),)),
        Chart("Step time (slowest rank)", "s", (_per_run("max", "train.step_time_s"),)),
    )),
    "stepwatch-hardware": ("stepwatch: hardware", (
        Chart("GPU utilization", "percent",
              (Query(_m("gpu.util_pct", _NODE), "{{node}} gpu {{gpu}}"),)),
        Chart("GPU temperature", "celsius",
              (Query(_m("gpu.temp_c", _NODE), "{{node}} gpu {{gpu}}"),)),
        Chart("GPU power", "watt", (Query(_m("gpu.power_w", _NODE), "{{node}} gpu {{gpu}}"),)),
        Chart("GPU memory used", "percentunit", (Query(
            f"{_m('gpu.mem_used_bytes', _NODE)} / {_m('gpu.mem_total_bytes', _NODE)}",
            "{{node}} gpu {{gpu}}"),)),
        Chart("Host CPU", "percent", (Query(_m("host.cpu_pct", _NODE), "{{node}}"),)),
        Chart("Host memory used", "percentunit", (Query(
            f"{_m('host.mem_used_bytes', _NODE)} / {_m('host.mem_total_bytes', _NODE)}",
            "{{node}}"),)),
        Chart("Network", "Bps", (
            Query(_m("host.net_rx_bytes_per_s", _NODE), "{{node}} in"),
            Query(_m("host.net_tx_bytes_per_s", _NODE), "{{node}} out"))),
        Chart("Free disk", "bytes", (Query(_m("host.disk_free_bytes", _NODE), "{{node}}"),)),
    )),
    "stepwatch-step-time": ("stepwatch: step time", (
        Chart("Step time across ranks", "s", tuple(
            _quantile(q, "train.step_time_s") for q in (0.5, 0.9, 0.99))),
        Chart("Where a step goes (mean of ranks)", "s", (
            Query(f"avg by (run) ({_m('train.compute_time_s', _RUN)})", "{{run}} compute"),
            Query(f"avg by (run) ({_m('train.data_time_s', _RUN)})", "{{run}} data"),
            Query(f"avg by (run) ({_m('train.comm_time_s', _RUN)})", "{{run}} communication"))),
    )),
    "stepwatch-sync": ("stepwatch: synchronisation", (
        Chart("Communication time by rank", "s",
              (Query(_m("train.comm_time_s", _RUN), "{{rank}}"),), heatmap=True),
        Chart("Compute time against the run's mean (stragglers above 1)", "none", (Query(
            f"{_m('train.compute_time_s', _RUN)} / ignoring(rank, node, gpu) group_left "
            f"avg by (run) ({_m('train.compute_time_s', _RUN)})", "{{run}} rank {{rank}}"),)),
    )),
}  # fmt: skip


def board_queries() -> Iterator[tuple[str, str, Query]]:
    """Every panel's queries: board uid, panel title, query."""
    for uid, (_, charts) in BOARDS.items():
        for chart in charts:
            for query in chart.queries:
                yield uid, chart.title, query


def _panel(chart: Chart) -> Any:
    built = heatmap.Panel() if chart.heatmap else timeseries.Panel()
    built = built.title(chart.title).unit(chart.unit).datasource(_SOURCE).span(12).height(8)
    for ref, query in zip("ABCDEFGH", chart.queries, strict=False):
        built = built.with_target(
            prometheus.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(ref)
        )
    return built


def _variable(name: str, metric: str) -> board.QueryVariable:
    return (
        board.QueryVariable(name).label(name).datasource(_SOURCE)
        .query(f"label_values({prometheus_name(metric)}, {name})")
        .multi(True).include_all(True)
    )  # fmt: skip


def dashboard_json(uid: str) -> dict[str, Any]:
    """One board as Grafana's JSON model."""
    title, charts = BOARDS[uid]
    source = board.DatasourceVariable("datasource").label("Data source").type("prometheus")
    built = (
        board.Dashboard(title).uid(uid).tags(["stepwatch"]).refresh("30s").time("now-6h", "now")
        .with_variable(source)
        .with_variable(_variable("run", "train.loss"))
        .with_variable(_variable("node", "gpu.util_pct"))
    )  # fmt: skip
    for chart in charts:
        built = built.with_panel(_panel(chart))
    return dict(json.loads(JSONEncoder(sort_keys=True, indent=2).encode(built.build())))


#: Grafana's provisioning of the boards from the folder they are written to.
PROVIDER = """\
apiVersion: 1
providers:
  - name: stepwatch
    folder: stepwatch
    type: file
    allowUiUpdates: false
    options:
      path: {path}
"""


def write_grafana(out: Path) -> list[Path]:
    """Write every board (``dashboards/<uid>.json``) and the provisioning file
    (``provisioning/dashboards/stepwatch.yaml``) under ``out``; the files written."""
    boards, provisioning = out / "dashboards", out / "provisioning" / "dashboards"
    boards.mkdir(parents=True, exist_ok=True)
    provisioning.mkdir(parents=True, exist_ok=True)
    written = []
    for uid in BOARDS:
        path = boards / f"{uid}.json"
        path.write_text(json.dumps(dashboard_json(uid), indent=2, sort_keys=True) + "\n")
        written.append(path)
    provider = provisioning / "stepwatch.yaml"
    provider.write_text(PROVIDER.format(path=boards.resolve()))
    return [*written, provider]
