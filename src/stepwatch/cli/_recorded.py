"""Commands over rules and recorded data: `rules check|test`, `replay` and `export`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from .._encryption import EncryptionKey
    from ..detect import AlertRecord, RuleSet

from ._base import (
    _clear_errors,
    _clear_rule_errors,
    _store_option,
    main,
)


@main.group()
def rules() -> None:
    """Check detection rule files and run their unit tests."""


@rules.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def rules_check(files: tuple[Path, ...]) -> None:
    """Validate rule FILES: every mistake is reported as file:line: field: what was expected,
    in line order."""
    from .._text import plural
    from ..detect import DETECTORS, RuleError, load_rules

    failed = False
    for path in files:
        try:
            count = len(load_rules(path, DETECTORS))
        except RuleError as exc:
            click.echo(str(exc), err=True)  # a line a mistake
            failed = True
        else:
            click.echo(f"{path}: {plural(count, 'rule')} OK")
    if failed:
        sys.exit(1)


@rules.command("test")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def rules_test(files: tuple[Path, ...]) -> None:
    """Run rule unit tests (input series, expected alerts), like `promtool test rules`."""
    from ..detect import DETECTORS, RuleError, builtin_rules, run_rule_tests

    failed = False
    for path in files:
        try:
            results = run_rule_tests(path, DETECTORS, builtin_rules)
        except RuleError as exc:
            click.echo(str(exc), err=True)
            failed = True
            continue
        bad = [r for r in results if not r.passed]
        click.echo(f"{path}: {len(results) - len(bad)} of {len(results)} tests passed")
        for result in bad:
            for failure in result.failures:
                click.echo(f"  FAILED {result.name}: {failure}")
        failed = failed or bool(bad)
    if failed:
        sys.exit(1)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--rules",
    "rule_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Rule file added to the built-in pack, as the collector's --rules: a rule of the "
    "same group and name replaces the built-in one (repeatable).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Alerts file to write (required unless --score).",
)
@click.option("--run", "run_id", default=None, help="The run to replay from a store file.")
@click.option(
    "--score",
    "score_alerts",
    is_flag=True,
    help="Score the alerts against the labels of the scenario folders and print the table.",
)
def replay(
    paths: tuple[Path, ...],
    rule_paths: tuple[Path, ...],
    out_path: Path | None,
    run_id: str | None,
    score_alerts: bool,
) -> None:
    """Run detection over recorded PATHS (scenario folders, Parquet exports, a store file)."""
    import time

    from .._text import plural
    from ..detect import RuleFiles, builtin_rules, describe, score, write_alerts

    if out_path is None and not score_alerts:
        raise click.UsageError("give --out FILE, --score, or both")
    with _clear_rule_errors():
        rules = RuleFiles(rule_paths, base=builtin_rules()).load()  # what the collector runs
    with _clear_errors():  # a recording it cannot read, a store another collector holds
        total = sum(describe(p, run=run_id).samples for p in paths)
        started = time.perf_counter()
        records = _replayed(paths, rules, run_id, total)
    elapsed = time.perf_counter() - started
    if out_path is not None:
        write_alerts(out_path, records)
    click.echo(
        f"{plural(len(records), 'alert')} from {total:,} samples in {elapsed:.1f} s "
        f"({total / max(elapsed, 1e-9):,.0f} samples/s)" + (f" -> {out_path}" if out_path else "")
    )
    if score_alerts:
        labelled = [p for p in paths if (p / "labels.json").is_file()]
        if not labelled:
            raise click.ClickException("--score needs scenario folders with a labels.json")
        click.echo(score(records, labelled).table())


def _replayed(
    paths: tuple[Path, ...], rules: RuleSet, run_id: str | None, total: int
) -> list[AlertRecord]:
    """The alerts of every path, with a progress bar over their ``total`` samples."""
    from rich.progress import Progress

    from ..detect import replay, to_record

    records = []
    with Progress(transient=True) as progress:
        task = progress.add_task("replaying", total=total)
        for path in paths:
            advance = lambda n: progress.advance(task, n)  # noqa: E731
            records += [to_record(a) for a in replay(path, rules, run=run_id, on_samples=advance)]
    return records


@main.group()
def export() -> None:
    """Export data out of the store."""


@export.command("parquet")
@click.argument("run_ids", nargs=-1, metavar="[RUN]...")
@_store_option(exists=True)
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Output file of one RUN (default: RUN.parquet).",
)
@click.option(
    "--dataset",
    "dataset",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write Hive-partitioned datasets (samples/, alerts/, gpus/, runs/, each "
    "project=P/run=R/day=D/) of the RUNs, or of every run, under this folder.",
)
@click.option("--project", default=None, help="With --dataset: only this project's runs.")
def export_parquet(
    run_ids: tuple[str, ...],
    store_path: Path,
    out_path: Path | None,
    dataset: Path | None,
    project: str | None,
    encryption_key: EncryptionKey | None,
) -> None:
    """Write every sample of RUN to a Parquet file (one row a sample, never encrypted); with
    --dataset, the samples, alerts, GPUs and runs of RUNs (or of all, or of --project) as datasets
    Spark, DuckDB and Polars read as they are (docs/fleet-analysis.md)."""
    from .._text import plural
    from ..store import Store

    if dataset is None and (len(run_ids) != 1 or project is not None):
        raise click.UsageError("give one RUN (with --out), or --dataset DIR")
    if dataset is not None and out_path is not None:
        raise click.UsageError("--out is for one RUN's file; --dataset writes a folder")
    with _clear_errors(), Store(store_path, key=encryption_key) as store:
        unknown = [r for r in run_ids if store.get_run(r) is None]
        if unknown:
            raise click.ClickException(f"no run {unknown[0]!r} in {store_path}")
        if dataset is not None:
            rows = store.export_dataset(dataset, project, list(run_ids) or None)
            said = ", ".join(plural(n, f"{table} row") for table, n in rows.items())
            click.echo(f"wrote {dataset}: {said}")
            return
        (run_id,) = run_ids
        written = store.export_parquet(run_id, out_path or Path(f"{run_id}.parquet"))
    click.echo(f"wrote {written} ({os.path.getsize(written)} bytes)")
