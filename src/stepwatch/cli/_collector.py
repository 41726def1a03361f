"""`stepwatch server` and `stepwatch demo`: the collector, alone or with a simulated training."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from .._encryption import EncryptionKey

from ._analyst import analyst_config, analyst_options
from ._base import (
    _broker_url,
    _clear_errors,
    _clear_rule_errors,
    _notify_option,
    _rules_option,
    _server_url,
    _stop_on_sigterm,
    _store_option,
    main,
)


def _fleet_key(path: Path | None) -> Any:
    """The key in ``path`` (None: none); a bad one is one line."""
    if path is None:
        return None
    from ..fleet import FleetKey

    try:
        return FleetKey.from_file(path)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _fleet_default(name: str) -> Any:
    """A fleet constant, read when the command runs (the broker client is slow to import)."""
    from .. import fleet

    return getattr(fleet, name)


def _collector_default(field: str) -> Callable[[], Any]:
    """The collector's own default for an option, read when the command runs (the server
    package is slow to import for every other command)."""

    def read() -> Any:
        from ..server import CollectorOptions

        return getattr(CollectorOptions(), field)

    return read


@main.command()
@_store_option(help="DuckDB file of the embedded store.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=7070, show_default=True, type=int)
@click.option(
    "--auth/--no-auth",
    default=None,
    help="Require tokens with roles and projects on every route "
    "(default: on unless --host is a loopback address).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A name the collector is reached by, besides its bind address and localhost "
    "(repeatable; '*' allows any). Other Host names are refused: DNS rebinding.",
)
@_rules_option
@_notify_option
@click.option(
    "--playbooks",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Allow-list of remediation playbooks (YAML) that alerts and people may run.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Serve HTTPS with this certificate (PEM; with --tls-key).",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The private key of --tls-cert (PEM).",
)
@click.option(
    "--tls-client-ca",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Mutual TLS: clients must present a certificate signed by this CA (PEM).",
)
@click.option(
    "--checkpoint-interval",
    "checkpoint_interval_s",
    default=_collector_default("checkpoint_interval_s"),
    show_default="60",
    type=float,
    metavar="S",
    help="Seconds between checkpoints of the detection state in the store (also taken at "
    "shutdown): a restart replays only what came after the last one.",
)
@click.option(
    "--metrics-public",
    is_flag=True,
    help="Serve /metrics to scrapers without a token even with auth on "
    "(its figures name no run nor project).",
)
@click.option(
    "--retention",
    metavar="KIND=AGE,...",
    default=None,
    help="How long the store keeps raw samples, each rollup tier and ingested events, counted "
    "back from the newest sample (default: raw=14d,10s=90d,300s=2y,events=90d; ages in s, m, "
    "h, d, w or y; kinds left out keep theirs). Alerts, audit and the collector's other "
    "records are never deleted.",
)
@click.option(
    "--max-store-bytes",
    metavar="SIZE|PCT%",
    default=None,
    help="Cap on the store's disk: a size (200G) or a share of its file system (80%). Always "
    "within what the file system has room for, keeping 5% of it (5 GiB at most) free. The "
    "collector alerts at 80% of the limit and sheds the oldest data before reaching it.",
)
@click.option(
    "--store-memory",
    metavar="SIZE|PCT%",
    default=None,
    help="Memory the store's database may hold: its cache of the file, indexes, rows not yet "
    "written into the file and query work (which spills to disk beyond it); a size (4G) or a "
    "share of the machine's memory (25%). Default: 1 GiB.",
)
@click.option(
    "--max-body-bytes",
    default=_collector_default("max_body_bytes"),
    show_default="64 MiB",
    type=click.IntRange(min=1),
    metavar="N",
    help="Ingest bodies above this many bytes are refused with 413.",
)
@click.option(
    "--upkeep-interval",
    "upkeep_interval_s",
    default=_collector_default("upkeep_interval_s"),
    show_default="10",
    type=float,
    metavar="S",
    help="Seconds between retention passes and measures of the store's size.",
)
@click.option(
    "--forecast-interval",
    "forecast_interval_s",
    default=_collector_default("forecast_interval_s"),
    show_default="30",
    type=float,
    metavar="S",
    help="Seconds between forecasts of the running runs that logged new steps, for the runs "
    "list's ETA and final loss (0: none; the ETA is then the steps left at the recent pace).",
)
@click.option(
    "--remote-write",
    "remote_write",
    multiple=True,
    metavar="URL",
    help="Forward every sample stored to this Prometheus remote-write receiver (Prometheus "
    "with --web.enable-remote-write-receiver: http://host:9090/api/v1/write; VictoriaMetrics; "
    "repeatable); ingest never waits for it (docs/prometheus.md).",
)
@click.option(
    "--influx-write",
    "influx_write",
    multiple=True,
    metavar="URL",
    help="Forward every sample stored to this InfluxDB write endpoint by line protocol "
    "(http://host:8086/write?db=stepwatch; repeatable), as --remote-write does.",
)
@click.option(
    "--broker",
    envvar="STEPWATCH_BROKER",
    default=None,
    callback=_broker_url,
    metavar="URL",
    help="Also read batches from this RabbitMQ broker (amqp://user:password@host:5672/), "
    "sharing its partitions with the other collectors reading it (env STEPWATCH_BROKER; "
    "docs/scaling.md).",
)
@click.option(
    "--broker-partitions",
    default=lambda: _fleet_default("DEFAULT_PARTITIONS"),
    show_default="16",
    type=click.IntRange(1, 4096),
    help="Streams the broker holds batches in; set once for a fleet.",
)
@click.option(
    "--broker-retention",
    default="1GiB",
    show_default=True,
    metavar="SIZE",
    help="What each partition keeps for a collector taking it over (RabbitMQ stream length).",
)
@click.option(
    "--broker-max-age",
    default="7D",
    show_default=True,
    metavar="AGE",
    help="How long each partition keeps batches (RabbitMQ's units: 12h, 7D).",
)
@click.option(
    "--collector-id",
    default=None,
    help="This collector's name in its fleet [default: host name:port]; unique per fleet.",
)
@click.option(
    "--fleet-key-file",
    "fleet_key",
    envvar="STEPWATCH_FLEET_KEY_FILE",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    callback=lambda ctx, param, value: _fleet_key(value),
    metavar="PATH",
    help="The fleet's shared secret (32+ bytes; the same file on every collector reading the "
    "broker): tokens made on one collector open all of them, and a request about a run another "
    "collector holds is answered by it for the same caller (env STEPWATCH_FLEET_KEY_FILE).",
)
@click.option(
    "--advertise-url",
    default=None,
    callback=_server_url,
    metavar="URL",
    help="Where the fleet's other collectors reach this one [default: the URL it listens on].",
)
@analyst_options
def server(
    store_path: Path,
    encryption_key: EncryptionKey | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_client_ca: Path | None,
    retention: str | None,
    max_store_bytes: str | None,
    store_memory: str | None,
    broker: str | None,
    broker_partitions: int,
    broker_retention: str,
    broker_max_age: str,
    **settings: Any,
) -> None:
    """Run the collector: ingest, store, detection, query API, web page and /metrics."""
    from .._sizes import parse_size
    from ..fleet import BrokerLayout
    from ..server import CollectorOptions, ServerTls, serve, store_limits, store_memory_limit

    with _clear_rule_errors(), _clear_errors():
        kept, cap = store_limits(retention, max_store_bytes)
        if store_memory is not None:
            settings["store_memory_bytes"] = store_memory_limit(store_memory)
        settings["analyst"] = analyst_config(
            settings.pop("analyst"),
            settings.pop("analyst_model"),
            settings.pop("analyst_key_file"),
            settings.pop("analyst_timeout_s"),
        )
        if broker is not None:
            kept_bytes = parse_size(broker_retention)
            settings["broker"] = BrokerLayout(broker, broker_partitions, kept_bytes, broker_max_age)
        options = CollectorOptions(
            key=encryption_key,
            tls=ServerTls.of(tls_cert, tls_key, tls_client_ca),
            retention=kept,
            disk_cap=cap,
            **settings,
        )
        serve(store_path, options)


@main.command()
@click.option("--duration", type=float, default=None, help="Stop by itself after S seconds.")
@click.option("--nodes", default=4, show_default=True, type=int)
@click.option("--gpus", default=8, show_default=True, type=int, help="GPUs (ranks) per node.")
@_store_option(default=Path("stepwatch-demo.duckdb"))
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
@_rules_option
@_notify_option
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="KIND[@S[+D]][:PLACE][*M]",
    help="Inject a fault from S seconds on (default 60), for D seconds, at PLACE (nodeN, "
    "nodeN/gpuG or rankR), of magnitude M (the kind's default unless given), e.g. "
    "gpu_thermal@60:node1/gpu3 or straggler@300:rank5*1.25. Kinds: every kind of the "
    "built-in pack (docs/detection.md lists them with their magnitudes; repeatable).",
)
@click.option(
    "--faults",
    "preset",
    default=None,
    metavar="PRESET",
    help="A set of faults: 'tour' (a straggler, a loss spike, an out-of-memory line and a hot "
    "GPU within the first 4 minutes; the default unless --fault is given) or 'none'.",
)
@click.option(
    "--record",
    "record_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write a labelled scenario to DIR/<name>/ in simulated time instead of running "
    "live (no collector); needs --duration.",
)
def demo(
    duration: float | None,
    nodes: int,
    gpus: int,
    store_path: Path,
    host: str,
    port: int,
    step_interval: float,
    seed: int,
    rules: tuple[Path, ...],
    faults: tuple[str, ...],
    preset: str | None,
    record_dir: Path | None,
    notify: Path | None,
    encryption_key: EncryptionKey | None,
) -> None:
    """Simulate a multi-node training streaming into a local collector, live."""
    from ..demo import DemoConfig, Fault, fault_preset, record_scenario, run_demo

    if record_dir is not None and duration is None:
        raise click.UsageError("--record needs --duration: how many simulated seconds to record")
    try:
        chosen = fault_preset(preset or ("none" if faults else "tour"), nodes, gpus)
        config = DemoConfig(
            nodes=nodes,
            gpus_per_node=gpus,
            duration_s=duration,
            store_path=store_path,
            host=host,
            port=port,
            step_interval_s=step_interval,
            seed=seed,
            rules=rules,
            notify=notify,
            faults=(*chosen, *(Fault.parse(f) for f in faults)),
            encryption_key=encryption_key,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if record_dir is not None:
        got = record_scenario(config, record_dir)
        click.echo(
            f"wrote {got.path}: {got.simulated_s:g} simulated s, {got.steps:,} steps, "
            f"{got.samples:,} samples, {got.log_lines} log lines, {got.labels} labels"
        )
        return
    stop = threading.Event()
    with _stop_on_sigterm(stop), _clear_rule_errors(), _clear_errors():
        run_demo(config, out=click.echo, stop=stop)
