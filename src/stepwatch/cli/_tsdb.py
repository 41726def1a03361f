"""Files for the monitoring stack a team already runs: `stepwatch rules export` (the rules as a
Prometheus rule file) and `stepwatch export grafana` (boards over the forwarded samples)."""

from __future__ import annotations

from pathlib import Path

import click

from ._base import _clear_rule_errors
from ._recorded import export, rules


@rules.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["prometheus"]),
    required=True,
    help="prometheus: a rule file over the names remote write gives the samples.",
)
@click.option(
    "--rules",
    "rule_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Rule file added to the built-in pack, as the collector's --rules (repeatable).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (default: standard output).",
)
def rules_export(fmt: str, rule_paths: tuple[Path, ...], out_path: Path | None) -> None:
    """Write the rules the collector runs as a Prometheus rule file, every rule PromQL can
    express; those it approximates and those it cannot are listed at its head and on
    standard error."""
    from ..detect import RuleFiles, builtin_rules
    from ..tsdb import export_prometheus

    with _clear_rule_errors():
        ruleset = RuleFiles(rule_paths, base=builtin_rules()).load()
    exported = export_prometheus(ruleset)
    text = exported.to_yaml()
    if out_path is None:
        click.echo(text, nl=False)
    else:
        out_path.write_text(text)
    count = sum(len(g["rules"]) for g in exported.groups)
    click.echo(
        f"{count} rules exported ({len(exported.approximated)} approximated), "
        f"{len(exported.skipped)} not: " + ", ".join(a for a, _ in exported.skipped),
        err=True,
    )


@export.command("grafana")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder to write the boards (dashboards/) and their provisioning file to.",
)
def export_grafana(out_dir: Path) -> None:
    """Write Grafana boards over the samples the collector forwards by remote write (runs,
    hardware, step time, synchronisation; data source, run and node as variables) and the
    provisioning file that loads them (docs/prometheus.md)."""
    from ..tsdb import write_grafana

    for path in write_grafana(out_dir):
        click.echo(str(path))
