"""What runs on a training node: `stepwatch agent`, `stepwatch run -- CMD` and `stepwatch sync`."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from .._encryption import EncryptionKey
    from ..collect import AgentOptions

from ._base import (
    _broker_url,
    _clear_errors,
    _client_tls,
    _encryption_option,
    _server_url,
    _stop_on_sigterm,
    _store_option,
    _tls_options,
    main,
)


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A size option (``512MiB``, ``2G``, bytes) in bytes, refused in one line when it is none."""
    from .._sizes import parse_size

    try:
        return None if value is None else parse_size(value)
    except ValueError as exc:
        raise click.ClickException(f"--max-spool {value}: {exc}") from None


def _agent_options(fn: Callable[..., None]) -> Callable[..., None]:
    """The options ``agent`` and ``run`` share: what the node agent reads, where it sends it."""
    options = [
        click.option(
            "--server",
            envvar="STEPWATCH_SERVER",
            default=None,
            callback=_server_url,
            help="Collector URL (env STEPWATCH_SERVER).",
        ),
        click.option(
            "--transport",
            envvar="STEPWATCH_TRANSPORT",
            default=None,
            callback=_broker_url,
            metavar="URL",
            help="Publish batches to this RabbitMQ broker instead of the collector, e.g. "
            "amqp://user:password@host:5672/ (env STEPWATCH_TRANSPORT; docs/scaling.md).",
        ),
        click.option("--token", envvar="STEPWATCH_TOKEN", default=None),
        click.option("--node", default=None, help="Node label [default: host name]."),
        click.option(
            "--dir",
            "spool_root",
            envvar="STEPWATCH_DIR",
            type=click.Path(path_type=Path),
            default=None,
            help="Spool root (env STEPWATCH_DIR) [default: ~/.stepwatch/spool].",
        ),
        click.option(
            "--max-spool",
            "max_spool_bytes",
            envvar="STEPWATCH_MAX_SPOOL_BYTES",
            metavar="SIZE",
            default=None,
            callback=_size,
            help="Cap of the agent's spool, e.g. 512MiB; 0: none (env STEPWATCH_MAX_SPOOL_BYTES) "
            "[default: the smaller of 2 GiB and 10% of the free space].",
        ),
        click.option(
            "--ship-orphans/--no-ship-orphans",
            envvar="STEPWATCH_SHIP_ORPHANS",
            default=True,
            show_default=True,
            help="Ship spools under the spool root whose writer is gone (a killed trainer) "
            "(env STEPWATCH_SHIP_ORPHANS).",
        ),
        click.option(
            "--interval", default=1.0, show_default=True, help="Seconds between host/GPU reads."
        ),
        click.option(
            "--gpu",
            default="auto",
            show_default=True,
            help="auto (NVML when a driver is there), nvml, none, or fake[:N] (simulated GPUs).",
        ),
        click.option(
            "--gpu-script",
            type=click.Path(exists=True, path_type=Path),
            default=None,
            help="JSON file scripting the fake GPUs (temperature ramps, XIDs...).",
        ),
        click.option(
            "--pod-resources",
            metavar="PATH",
            default="/var/lib/kubelet/pod-resources/kubelet.sock",
            show_default=True,
            help="The kubelet's pod-resources socket, which names the pod each GPU is allocated "
            "to; none: each GPU's pod is found from its processes alone.",
        ),
        click.option(
            "--scrape", multiple=True, help="Prometheus exporter URL to read (repeatable)."
        ),
        click.option("--scrape-interval", default=15.0, show_default=True),
        click.option(
            "--log",
            "logs",
            multiple=True,
            type=click.Path(path_type=Path),
            help="Log file to tail (repeatable).",
        ),
        click.option(
            "--parse",
            metavar="FORMAT",
            default=None,
            help="Read the training metrics (loss, lr, grad norm, step time, throughput) that "
            "every --log file (under `run`, the command's output too) prints as megatron, "
            "deepspeed, nemo, torchtitan or hf; auto: the first format a line of it matches.",
        ),
        click.option(
            "--path",
            "paths",
            multiple=True,
            type=click.Path(path_type=Path),
            help="Checkpoint/data path whose free space to watch (repeatable).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return _tls_options(fn)


def _agent_settings(run_id: str | None, **given: Any) -> AgentOptions:
    """The agent's options, refused in one line when a ``--pid`` or ``--log`` cannot be there."""
    from ..collect import AgentOptions

    socket = given.pop("pod_resources")
    fields = {k: v for k, v in given.items() if v is not None}
    fields["pod_resources"] = None if socket == "none" else Path(socket)
    fields["interval_s"] = fields.pop("interval")
    fields["scrape_interval_s"] = fields.pop("scrape_interval")
    options = AgentOptions(run_id=run_id, tls=_client_tls(), **fields)
    with _clear_errors():
        options.check_targets()
    return options


@main.command()
@_agent_options
@click.option("--run", "run_id", envvar="STEPWATCH_RUN_ID", default=None, help="Label with a run.")
@click.option("--pid", "pids", multiple=True, type=int, help="Process to watch, with children.")
@click.option("--duration", type=float, default=None, help="Stop by itself after S seconds.")
@_encryption_option
def agent(run_id: str | None, duration: float | None, **given: Any) -> None:
    """Run the node agent: host, GPU, exporter and log metrics, shipped to the collector."""
    from ..collect import open_agent

    if given["parse"] is not None and not given["logs"]:
        raise click.ClickException("--parse reads the --log files: give one")
    options = _agent_settings(run_id, **given)
    with _clear_errors():
        node_agent = open_agent(options, say=lambda line: click.echo(line, err=True)).start()
    names = ", ".join(sorted({s.name for s in node_agent.sources}))
    click.echo(f"stepwatch agent on {options.node}: {names}", err=True)
    stop = threading.Event()
    try:
        with _stop_on_sigterm(stop):
            stop.wait(duration)
    except KeyboardInterrupt:
        pass
    if not node_agent.stop() and options.server:
        click.echo("stepwatch agent: data left in the spool; `stepwatch sync` sends it", err=True)


@main.command(context_settings={"ignore_unknown_options": True})
@_agent_options
@click.option("--name", default="", help="Run name [default: the command].")
@click.option("--project", default="default", show_default=True)
@click.option("--run-id", envvar="STEPWATCH_RUN_ID", default=None)
@_store_option(help="Store of the collector started when no --server is given.")
@click.option(
    "--keep-serving",
    is_flag=True,
    help="After the command, the collector started for it serves on until Ctrl-C.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    command: tuple[str, ...],
    name: str,
    project: str,
    run_id: str | None,
    store_path: Path,
    keep_serving: bool,
    encryption_key: EncryptionKey | None,
    **given: Any,
) -> None:
    """Run COMMAND (after --) as a watched run: `stepwatch run -- torchrun ... train.py`.

    Without --server it starts a collector on port 7070 (a free one if 7070 is taken).
    """
    from ..launch import Launch, launch

    if keep_serving and given["server"]:
        raise click.ClickException("--keep-serving is for the collector started without --server")
    options = _agent_settings(run_id, encryption_key=encryption_key, **given)
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    with _clear_errors():
        outcome = launch(
            Launch(
                command,
                agent=options,
                project=project,
                name=name,
                store_path=store_path,
                keep_serving=keep_serving,
            ),
            say=say,
        )
    say(outcome.closing())
    sys.exit(outcome.exit_code)


@main.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--server",
    "server_url",
    envvar="STEPWATCH_SERVER",
    required=True,
    callback=_server_url,
    help="Collector URL, e.g. http://127.0.0.1:7070 (env STEPWATCH_SERVER).",
)
@click.option("--token", envvar="STEPWATCH_TOKEN", default=None)
@_tls_options
@click.option(
    "--timeout", default=60.0, show_default=True, help="Give up retrying after S seconds."
)
@_encryption_option
def sync(
    path: Path,
    server_url: str,
    token: str | None,
    timeout: float,
    encryption_key: EncryptionKey | None,
) -> None:
    """Upload runs logged offline (or left by a killed process) from a spool directory."""
    from ..spool import Sealer
    from ..spool import sync as sync_spool

    with _clear_errors():  # a spool sealed with another key, or no key for it
        sealer = Sealer(encryption_key) if encryption_key else None
        result = sync_spool(
            path, server_url, token=token, timeout_s=timeout, sealer=sealer, tls=_client_tls()
        )
    if not result.ok:
        raise click.ClickException(result.describe())
    click.echo(result.describe())
