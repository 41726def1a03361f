"""Draw a Snapshot as a rich renderable: the run's header (with its forecast), its GPUs by
node, its open alerts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .._text import format_duration
from ._snapshot import AlertRow, Forecast, GpuRow, Snapshot, StepTimes

__all__ = ["format_duration", "render", "sparkline"]

_TICKS = "▁▂▃▄▅▆▇█"
_BAR = 8
_STATUS_STYLE = {"running": "green", "finished": "blue", "failed": "red", "killed": "yellow"}
_SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}
GIB = 1024**3
#: Open alerts listed; the count says how many more there are.
MAX_ALERTS = 5
#: Lines of the header panel.
HEADER_LINES = 6


def sparkline(values: Sequence[float]) -> Text:
    """One character per value, scaled between their finite min and max; NaN/Inf as a red ×."""
    finite = [v for v in values if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    out = Text()
    for v in values:
        if not math.isfinite(v):
            out.append("×", style="red")
        else:
            level = 0 if hi == lo else round((v - lo) / (hi - lo) * (len(_TICKS) - 1))
            out.append(_TICKS[level], style="cyan")
    return out


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"


def _si(value: float | None) -> str:
    if value is None:
        return "–"
    for factor, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.2f}{unit}"
    return f"{value:.0f}"


def _fraction_bar(fraction: float, style: str, width: int = _BAR) -> Text:
    """A bar that reads without colour too: filled blocks, then shaded ones."""
    if not math.isfinite(fraction) or fraction < 0:  # unknown
        return Text("·" * width, style="dim")
    filled = round(min(1.0, max(0.0, fraction)) * width)
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


@dataclass(frozen=True, slots=True)
class _WideBar:
    """A fraction bar as wide as the space it is given."""

    fraction: float

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _fraction_bar(self.fraction, "green", options.max_width)


def _progress_row(snap: Snapshot) -> Table:
    row = Table.grid(padding=(0, 1), expand=True)
    row.add_column(no_wrap=True)
    row.add_column(ratio=1)
    row.add_column(no_wrap=True, justify="right")
    step = "–" if snap.step is None else f"{snap.step:,}"
    planned = f" / {snap.planned_steps:,}" if snap.planned_steps else ""
    progress = snap.progress
    bar = _WideBar(math.nan if progress is None else progress)
    eta = snap.forecast.eta_s
    right = "–" if progress is None else f"{progress:.1%}"
    if eta is not None:
        right += f"  ETA {format_duration(eta)}"
    row.add_row(Text.assemble("step ", (step, "bold"), planned), bar, right)
    return row


def _training_row(snap: Snapshot) -> Text:
    loss = "–" if snap.loss is None else f"{snap.loss:.4f}"
    lr = "–" if snap.lr is None else f"{snap.lr:.2e}"
    pace = "" if snap.steps_per_s is None else f"  {snap.steps_per_s:.3g} steps/s"
    return Text.assemble(
        "loss ",
        (loss, "bold"),
        " ",
        sparkline(snap.loss_recent),
        f"  lr {lr}  {_si(snap.tokens_per_s)} tok/s{pace}",
    )


def _interval(p10: float | None, p90: float | None, show: Callable[[float], str]) -> str:
    """The p10-p90 range of a figure, when known."""
    return "" if p10 is None or p90 is None else f" ({show(p10)}–{show(p90)})"


def _forecast_row(forecast: Forecast) -> Text:
    """The ETA and the final loss forecast, each with its p10-p90 range when the collector
    made a forecast of the run."""
    f = forecast
    if f.eta_s is None and f.final_loss_p50 is None:
        return Text("forecast –", style="dim")
    eta = "–" if f.eta_s is None else format_duration(f.eta_s)
    loss = "–" if f.final_loss_p50 is None else f"{f.final_loss_p50:.4g}"
    return Text.assemble(
        ("forecast ", "dim"),
        "ETA ",
        (eta, "bold"),
        _interval(f.eta_s_p10, f.eta_s_p90, format_duration),
        (" · ", "dim"),
        "final loss ",
        (loss, "bold"),
        _interval(f.final_loss_p10, f.final_loss_p90, lambda v: f"{v:.4g}"),
    )


def _step_row(times: StepTimes) -> Text:
    return Text.assemble(
        "step p50 ",
        (_seconds(times.p50_s), "bold"),
        f" p99 {_seconds(times.p99_s)}",
        (" · data ", "dim"),
        _seconds(times.data_s),
        (" · compute ", "dim"),
        _seconds(times.compute_s),
        (" · comm ", "dim"),
        _seconds(times.comm_s),
    )


def _header(snap: Snapshot, now: float) -> Panel:
    status = Text(snap.status or "?", style=_STATUS_STYLE.get(snap.status, ""))
    title = Text.assemble((snap.name, "bold"), "  ", status)
    age = (
        "no data yet" if snap.last_ts is None else f"data {format_duration(now - snap.last_ts)} old"
    )
    body = Group(
        _progress_row(snap),
        _forecast_row(snap.forecast),
        _training_row(snap),
        _step_row(snap.step_times),
    )
    return Panel(body, title=title, title_align="left", subtitle=f"{snap.run_id} · {age}")


def _gpu_cells(g: GpuRow) -> list[RenderableType]:
    mem = _fraction(g.mem_used_bytes, g.mem_total_bytes)
    power = _fraction(g.power_w, g.power_limit_w)
    temp_style = "red" if g.temp_c >= 85 else "yellow" if g.temp_c >= 75 else ""
    util = "–" if math.isnan(g.util_pct) else f"{g.util_pct:3.0f}%"
    memory = "–" if math.isnan(g.mem_used_bytes) else f"{g.mem_used_bytes / GIB:.1f}"
    if not math.isnan(g.mem_total_bytes):
        memory += f"/{g.mem_total_bytes / GIB:.0f} GiB"
    temp = "–" if math.isnan(g.temp_c) else f"{g.temp_c:.0f}°C"
    watts = "–" if math.isnan(g.power_w) else f"{g.power_w:.0f} W"
    return [
        _fraction_bar(g.util_pct / 100, "green") + " " + util,
        _fraction_bar(mem, "red" if mem >= 0.95 else "magenta") + " " + memory,
        Text(temp, style=temp_style),
        _fraction_bar(power, "yellow") + " " + watts,
    ]


def _gpu_table(gpus: Sequence[GpuRow], max_rows: int | None) -> RenderableType:
    """A row per GPU; a row per node (averaged, fullest, hottest, summed) when they do not fit."""
    if not gpus:
        return Text("no GPU readings for this run", style="dim")
    per_node = max_rows is not None and len(gpus) + 1 > max_rows
    rows = _node_rows(gpus) if per_node else gpus
    columns = ("node", "gpus", "util (mean)", "memory (fullest)", "temp (max)", "power (sum)")
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for name in columns if per_node else ("node", "gpu", "util", "memory", "temp", "power"):
        table.add_column(name, no_wrap=True)
    shown_node = None
    for g in rows:
        node = g.node if g.node != shown_node else ""
        table.add_row(node, g.gpu, *_gpu_cells(g))
        shown_node = g.node
    return table


def _node_rows(gpus: Sequence[GpuRow]) -> list[GpuRow]:
    """One GpuRow per node that stands for its GPUs; ``gpu`` holds how many there are."""
    nodes: dict[str, list[GpuRow]] = {}
    for g in gpus:
        nodes.setdefault(g.node, []).append(g)
    rows = []
    for node, group in nodes.items():
        util = [g.util_pct for g in group if math.isfinite(g.util_pct)]
        fullest = max(group, key=lambda g: _fraction(g.mem_used_bytes, g.mem_total_bytes))
        temps = [g.temp_c for g in group if math.isfinite(g.temp_c)]
        rows.append(
            GpuRow(
                node,
                str(len(group)),
                sum(util) / len(util) if util else math.nan,
                fullest.mem_used_bytes,
                fullest.mem_total_bytes,
                max(temps, default=math.nan),
                math.fsum(g.power_w for g in group),
                math.fsum(g.power_limit_w for g in group),
            )
        )
    return rows


def _fraction(part: float, whole: float) -> float:
    """part / whole, or -1 when unknown (so it sorts below every known fraction)."""
    value = part / whole if whole else math.nan
    return value if math.isfinite(value) else -1.0


def _alerts(alerts: Sequence[AlertRow] | None, now: float) -> RenderableType:
    """The newest MAX_ALERTS open alerts, above the GPUs so a long GPU list never hides them."""
    if alerts is None:
        return Text("alerts: this collector offers none", style="dim")
    if not alerts:
        return Text("no open alerts", style="green")
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for name in ("severity", "alert", "what", "since"):
        table.add_column(name, no_wrap=name != "what")
    newest = sorted(alerts, key=lambda a: a.since or 0.0, reverse=True)
    for a in newest[:MAX_ALERTS]:
        where = " ".join(f"{k}={v}" for k, v in a.labels.items())
        since = "" if a.since is None else format_duration(now - a.since)
        severity = Text(a.severity, style=_SEVERITY_STYLE.get(a.severity, ""))
        table.add_row(severity, a.name, a.summary or where, since)
    more = len(alerts) - MAX_ALERTS
    title = f"{len(alerts)} open alerts" + (f" ({more} older not shown)" if more > 0 else "")
    return Group(Text(title, style="bold red"), table)


def render(snap: Snapshot, now: float | None = None, height: int | None = None) -> RenderableType:
    """The whole frame.

    Args:
        snap: what to show.
        now: wall-clock seconds that date the ages shown (default: when the snapshot was taken).
        height: lines available; when a row per GPU would not fit, a row per node is shown.
    """
    at = snap.taken_at if now is None else now
    alerts = _alerts(snap.alerts, at)
    max_rows = None
    if height is not None:
        alert_lines = 2 + min(len(snap.alerts), MAX_ALERTS) if snap.alerts else 1
        max_rows = height - HEADER_LINES - alert_lines
    return Group(_header(snap, at), alerts, _gpu_table(snap.gpus, max_rows))
