"""`stepwatch trace`: profiler traces analysed where they lie, without a collector: where each
step's time goes, the operators and kernels that take it, what to change; two traces compared,
and the ranks of one job against each other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._base import _clear_errors, main

if TYPE_CHECKING:
    from ..trace import Comparison, RankSkew, TraceReport

#: Rows of the tables people read (--json lists every operator).
_TOP = 15


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object a line: each trace, "
    "then the ranks side by side (several ranks), then the comparison (--compare).",
)
@click.option("--compare", is_flag=True, help="Two files, before and after: per-operator "
              "deltas (per step when both recorded steps).")  # fmt: skip
def trace(files: tuple[Path, ...], as_json: bool, compare: bool) -> None:
    """Analyse torch.profiler (Chrome/Kineto JSON, plain or .gz) trace FILES, streamed: time
    split into compute, communication, memory copies and idle; operators and kernels by self
    time; launches; the CPU side; advice. Several ranks of one job are compared at their
    collectives."""
    from ..trace import TraceError, analyse_trace, compare_ranks, compare_traces

    if compare and len(files) != 2:
        raise click.UsageError("--compare takes two files: before and after")
    with _clear_errors():
        try:
            reports = [analyse_trace(f) for f in files]
        except TraceError as exc:
            raise click.ClickException(str(exc)) from None
    ranks = compare_ranks(reports) if not compare and _distinct_ranks(reports) else None
    comparison = compare_traces(*reports) if compare else None
    if as_json:
        objects = [r.to_json() for r in reports]
        objects += [x.to_json() for x in (ranks, comparison) if x is not None]
        for obj in objects:
            click.echo(json.dumps(obj, allow_nan=False))
        return
    from rich.console import Console

    console = Console()
    for report in reports:
        _print_report(console, report)
    if ranks is not None:
        _print_ranks(console, ranks)
    if comparison is not None:
        _print_comparison(console, comparison)


def _distinct_ranks(reports: list[TraceReport]) -> bool:
    """Several traces of one job: each names its rank, and no two the same one."""
    ranks = [r.rank for r in reports]
    return len(ranks) > 1 and None not in ranks and len(set(ranks)) == len(ranks)


def _print_report(console: Any, r: TraceReport) -> None:
    from ._tables import titled_table

    b = r.breakdown
    where = f"{b.devices} GPU(s)" if b.basis == "gpu" else "the training thread (no GPU events)"
    rank = "" if r.rank is None else f", rank {r.rank} of {r.world_size}"
    console.print(f"[bold]{r.path}[/bold]{rank}: {r.events:,} events, {r.steps} steps, "
                  f"span {_s(b.span_s)}; time on {where}")  # fmt: skip
    split = titled_table("Time", ["compute", "comm", "memcpy", "idle"])
    capacity = b.span_s * max(b.devices, 1)
    split.add_row(*(_part(getattr(b, k), capacity) for k in ("compute", "comm", "memcpy", "idle")))
    console.print(split)
    if r.overlap is not None and r.overlap.share is not None:
        console.print(f"communication {_s(r.overlap.comm_s)}, {r.overlap.share:.0%} of it "
                      f"overlapped with compute")  # fmt: skip
    for title, stats in (("Operators by self time", r.ops), ("Kernels by time", r.kernels)):
        if stats:
            table = titled_table(title, ["name", "self", "calls", "share", "kind"])
            for s in stats[:_TOP]:
                table.add_row(s.name, _us(s.self_us), f"{s.calls:,}", f"{s.share:.1%}", s.kind)
            console.print(table)
    if r.launches is not None:
        n = r.launches
        delay = "" if n.delay_mean_us is None else (
            f"; launch to start {n.delay_mean_us:.1f} µs mean, {n.delay_p90_us:.1f} µs p90"
        )  # fmt: skip
        console.print(f"launches {n.launches:,} (graphs {n.graph_launches:,}), kernels "
                      f"{n.kernels:,}, under {n.tiny_under_us:g} µs {n.tiny_kernels:,} "
                      f"({n.tiny_share:.0%}){delay}")  # fmt: skip
    if r.cpu is not None:
        c = r.cpu
        console.print(f"CPU (thread {c.thread}): in operators {_s(c.busy_s)}, outside "
                      f"{_s(c.outside_ops_s)}, data loading {_s(c.dataloader_s)}")  # fmt: skip
    for advice in r.advice:
        console.print(f"[yellow]advice ({advice.kind})[/yellow]: {advice.message}")
    console.print()


def _print_ranks(console: Any, skew: RankSkew) -> None:
    from ._tables import titled_table

    table = titled_table("Ranks", ["rank", "span", "compute", "comm", "idle", "late", "waited"])
    for row in skew.ranks:
        table.add_row(str(row["rank"]), _s(row["span_s"]), _s(row["compute"]), _s(row["comm"]),
                      _s(row["idle"]), f"{row['times_late']:,}", _s(row["wait_s"]))  # fmt: skip
    console.print(table)
    if skew.late_rank is None:
        console.print("no collectives to align")
        return
    console.print(f"{skew.collectives:,} collectives aligned; skew before them "
                  f"{_us(skew.skew_mean_us)} mean, {_us(skew.skew_p50_us)} median, "
                  f"{_us(skew.skew_max_us)} max; rank {skew.late_rank} arrives last at "
                  f"{skew.late_count:,}")  # fmt: skip
    if skew.culprit is not None:
        c = skew.culprit
        console.print(f"on rank {skew.late_rank}, {c['name']} takes {_us(c['late_us'])} a step "
                      f"against {_us(c['others_median_us'])} on the others")  # fmt: skip


def _print_comparison(console: Any, c: Comparison) -> None:
    from ._tables import titled_table

    unit = "a step" if c.per_step else "in total"
    console.print(f"[bold]{c.after}[/bold] against [bold]{c.before}[/bold], {unit}:")
    table = titled_table("Time", ["part", "before", "after", "change"])
    for part, v in c.breakdown.items():
        sign = "+" if v["delta"] >= 0 else "-"
        table.add_row(part, _s(v["before"]), _s(v["after"]), sign + _s(abs(v["delta"])))
    console.print(table)
    for title, deltas in (("Operators", c.ops), ("Kernels", c.kernels)):
        if deltas:
            table = titled_table(title, ["name", "before", "after", "change", "calls"])
            for d in deltas[:_TOP]:
                table.add_row(d.name, _us(d.before_us), _us(d.after_us), _signed_us(d.delta_us),
                              f"{d.before_calls:g} → {d.after_calls:g}")  # fmt: skip
            console.print(table)


def _part(seconds: float, capacity: float) -> str:
    share = f" ({seconds / capacity:.0%})" if capacity > 0 else ""
    return _s(seconds) + share


def _s(seconds: float) -> str:
    """Seconds as people read them: 1.234 s, 12.3 ms, 45.6 µs."""
    return f"{seconds:.4g} s" if abs(seconds) >= 1 else _us(seconds * 1e6)


def _signed_us(us: float) -> str:
    return ("+" if us >= 0 else "-") + _us(abs(us))


def _us(us: float | None) -> str:
    if us is None:
        return ""
    return f"{us / 1e3:,.2f} ms" if abs(us) >= 1e3 else f"{us:,.1f} µs"
