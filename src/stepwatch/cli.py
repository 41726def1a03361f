"""The `stepwatch` command: one entry point, each subcommand a thin call into its layer.

Imports happen inside the commands so `stepwatch --help` stays fast and a
command only loads what it uses.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

DEFAULT_STORE = Path("stepwatch.duckdb")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="stepwatch")
def main() -> None:
    """Watch large-model training runs while they happen and keep them healthy."""


@main.command()
@click.option(
    "--store",
    "store_path",
    type=click.Path(path_type=Path),
    default=DEFAULT_STORE,
    show_default=True,
    help="DuckDB file of the embedded store.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=7070, show_default=True, type=int)
@click.option(
    "--token",
    envvar="STEPWATCH_TOKEN",
    default=None,
    help="Require 'Authorization: Bearer TOKEN' on every route (env STEPWATCH_TOKEN).",
)
def server(store_path: Path, host: str, port: int, token: str | None) -> None:
    """Run the collector: ingest, store, query API and web page."""
    from .server import serve

    serve(store_path, host=host, port=port, token=token)


@main.command()
@click.option("--duration", type=float, default=None, help="Stop by itself after S seconds.")
@click.option("--nodes", default=4, show_default=True, type=int)
@click.option("--gpus", default=8, show_default=True, type=int, help="GPUs (ranks) per node.")
@click.option(
    "--store",
    "store_path",
    type=click.Path(path_type=Path),
    default=Path("stepwatch-demo.duckdb"),
    show_default=True,
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=7070, show_default=True, type=int)
@click.option(
    "--step-interval",
    default=0.5,
    show_default=True,
    type=float,
    help="Seconds of wall time per simulated optimizer step.",
)
@click.option("--seed", default=0, show_default=True, type=int)
def demo(
    duration: float | None,
    nodes: int,
    gpus: int,
    store_path: Path,
    host: str,
    port: int,
    step_interval: float,
    seed: int,
) -> None:
    """Simulate a multi-node training streaming into a local collector, live."""
    from .demo import DemoConfig, run_demo

    config = DemoConfig(
        nodes=nodes,
        gpus_per_node=gpus,
        duration_s=duration,
        store_path=store_path,
        host=host,
        port=port,
        step_interval_s=step_interval,
        seed=seed,
    )
    run_demo(config, out=click.echo)


@main.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--server",
    "server_url",
    envvar="STEPWATCH_SERVER",
    required=True,
    help="Collector URL, e.g. http://127.0.0.1:7070 (env STEPWATCH_SERVER).",
)
@click.option("--token", envvar="STEPWATCH_TOKEN", default=None)
@click.option(
    "--timeout", default=60.0, show_default=True, help="Give up retrying after S seconds."
)
def sync(path: Path, server_url: str, token: str | None, timeout: float) -> None:
    """Upload runs logged offline (or left by a killed process) from a spool directory."""
    from .spool import sync as sync_spool

    result = sync_spool(path, server_url, token=token, timeout_s=timeout)
    click.echo(f"synced {result}")
    if result.rejected or result.unsent:
        sys.exit(1)


@main.group()
def export() -> None:
    """Export data out of the store."""


@export.command("parquet")
@click.argument("run_id")
@click.option(
    "--store",
    "store_path",
    type=click.Path(exists=True, path_type=Path),
    default=DEFAULT_STORE,
    show_default=True,
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Output file (default: RUN.parquet).",
)
def export_parquet(run_id: str, store_path: Path, out_path: Path | None) -> None:
    """Write every sample of RUN to a Parquet file (one row a sample)."""
    from .store import Store

    with Store(store_path) as store:
        if store.get_run(run_id) is None:
            raise click.ClickException(f"no run {run_id!r} in {store_path}")
        written = store.export_parquet(run_id, out_path or Path(f"{run_id}.parquet"))
    click.echo(f"wrote {written} ({os.path.getsize(written)} bytes)")


if __name__ == "__main__":
    main()
