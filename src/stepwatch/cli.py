"""The `stepwatch` command: one entry point, each subcommand a thin call into its layer.

Imports happen inside the commands so `stepwatch --help` stays fast and a
command only loads what it uses.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from .collect import AgentOptions

DEFAULT_STORE = Path("stepwatch.duckdb")


def _store_option(
    default: Path = DEFAULT_STORE, exists: bool = False, help: str | None = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--store FILE``: the DuckDB file a command opens."""
    return click.option(
        "--store",
        "store_path",
        type=click.Path(exists=exists, path_type=Path),
        default=default,
        show_default=True,
        help=help,
    )


def _rules_option(fn: Callable[..., None]) -> Callable[..., None]:
    """``--rules FILE`` (repeatable): rule files the collector runs besides the built-in pack."""
    return click.option(
        "--rules",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="Rule file added to the built-in pack; a rule of the same group and name "
        "replaces the built-in one. Re-read when it changes (repeatable).",
    )(fn)


def _notify_option(fn: Callable[..., None]) -> Callable[..., None]:
    """``--notify FILE``: where the collector sends alerts (receivers and routes)."""
    return click.option(
        "--notify",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Notifications file (YAML): receivers (webhook, slack, email, alertmanager) "
        "and the routes of alerts to them.",
    )(fn)


@contextmanager
def _clear_rule_errors() -> Iterator[None]:
    """A mistake in a rule file is its file:line message, not a traceback."""
    from .detect import RuleError

    try:
        yield
    except RuleError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="stepwatch")
def main() -> None:
    """Watch large-model training runs while they happen and keep them healthy."""


@main.command()
@_store_option(help="DuckDB file of the embedded store.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=7070, show_default=True, type=int)
@click.option(
    "--token",
    envvar="STEPWATCH_TOKEN",
    default=None,
    help="Require 'Authorization: Bearer TOKEN' on every route (env STEPWATCH_TOKEN).",
)
@_rules_option
@_notify_option
@click.option(
    "--playbooks",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Allow-list of remediation playbooks (YAML) that alerts and people may run.",
)
def server(
    store_path: Path,
    host: str,
    port: int,
    token: str | None,
    rules: tuple[Path, ...],
    playbooks: Path | None,
    notify: Path | None,
) -> None:
    """Run the collector: ingest, store, detection, query API and web page."""
    from .server import serve

    with _clear_rule_errors():
        serve(
            store_path,
            host=host,
            port=port,
            token=token,
            rules=rules,
            playbooks=playbooks,
            notify=notify,
        )


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
    metavar="KIND[@S[+D]][:PLACE]",
    help="Inject a fault from S seconds on (default 60), for D seconds, at PLACE (nodeN, "
    "nodeN/gpuG or rankR), e.g. gpu_thermal@60:node1/gpu3. Kinds: nonfinite, loss_spike, "
    "loss_divergence, straggler, gpu_thermal, gpu_memory_pressure, node_down, log_oom "
    "(repeatable).",
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
    record_dir: Path | None,
    notify: Path | None,
) -> None:
    """Simulate a multi-node training streaming into a local collector, live."""
    from .demo import DemoConfig, Fault, record_scenario, run_demo

    if record_dir is not None and duration is None:
        raise click.UsageError("--record needs --duration: how many simulated seconds to record")
    try:
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
            faults=tuple(Fault.parse(f) for f in faults),
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
    with _stop_on_sigterm(stop), _clear_rule_errors():
        run_demo(config, out=click.echo, stop=stop)


def _agent_options(fn: Callable[..., None]) -> Callable[..., None]:
    """The options ``agent`` and ``run`` share: what the node agent reads, where it sends it."""
    options = [
        click.option(
            "--server",
            envvar="STEPWATCH_SERVER",
            default=None,
            help="Collector URL (env STEPWATCH_SERVER).",
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
            "--path",
            "paths",
            multiple=True,
            type=click.Path(path_type=Path),
            help="Checkpoint/data path whose free space to watch (repeatable).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _agent_settings(run_id: str | None, **given: Any) -> AgentOptions:
    from .collect import AgentOptions

    fields = {k: v for k, v in given.items() if v is not None}
    fields["interval_s"] = fields.pop("interval")
    fields["scrape_interval_s"] = fields.pop("scrape_interval")
    return AgentOptions(run_id=run_id, **fields)


@main.command()
@_agent_options
@click.option("--run", "run_id", envvar="STEPWATCH_RUN_ID", default=None, help="Label with a run.")
@click.option("--pid", "pids", multiple=True, type=int, help="Process to watch, with children.")
@click.option("--duration", type=float, default=None, help="Stop by itself after S seconds.")
def agent(run_id: str | None, duration: float | None, **given: Any) -> None:
    """Run the node agent: host, GPU, exporter and log metrics, shipped to the collector."""
    from .collect import open_agent

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


@contextmanager
def _clear_errors() -> Iterator[None]:
    """A missing GPU or a bad option value is one line for the user, not a traceback."""
    from .collect import GpuUnavailable

    try:
        yield
    except (GpuUnavailable, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


@contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM (systemd, Kubernetes, `kill`) stops as cleanly as Ctrl-C."""
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@main.command(context_settings={"ignore_unknown_options": True})
@_agent_options
@click.option("--name", default="", help="Run name [default: the command].")
@click.option("--project", default="default", show_default=True)
@click.option("--run-id", envvar="STEPWATCH_RUN_ID", default=None)
@_store_option(help="Store of the collector started when no --server is given.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    command: tuple[str, ...],
    name: str,
    project: str,
    run_id: str | None,
    store_path: Path,
    **given: Any,
) -> None:
    """Run COMMAND (after --) as a watched run: `stepwatch run -- torchrun ... train.py`."""
    from .launch import Launch, launch

    options = _agent_settings(run_id, **given)
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    with _clear_errors():
        outcome = launch(
            Launch(command, agent=options, project=project, name=name, store_path=store_path),
            say=say,
        )
    say(f"stepwatch: run {outcome.run_id} {outcome.status}")
    sys.exit(outcome.exit_code)


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
    if result.error:
        click.echo(f"Error: {result.error}", err=True)
    if result.rejected or result.unsent:
        sys.exit(1)


def _client_options(fn: Callable[..., None]) -> Callable[..., None]:
    """``--server`` and ``--token`` of the commands that talk to a running collector."""
    fn = click.option("--token", envvar="STEPWATCH_TOKEN", default=None)(fn)
    return click.option(
        "--server",
        "server_url",
        envvar="STEPWATCH_SERVER",
        default="http://127.0.0.1:7070",
        show_default=True,
        help="Collector URL (env STEPWATCH_SERVER).",
    )(fn)


@contextmanager
def _client(server_url: str, token: str | None) -> Iterator[Any]:
    """A client of the collector's alerts, silences, actions and audit API.

    Its errors become one line for the user instead of a traceback.
    """
    from .server._actions_client import ActionsClient
    from .server._alerts_client import ClientError

    try:
        with ActionsClient(server_url, token) as client:
            yield client
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None


@main.command()
@_client_options
@click.option("--run", "run_id", default=None, help="Only the alerts of this run.")
@click.option(
    "--state",
    type=click.Choice(["open", "firing", "pending", "resolved", "all"]),
    default="open",
    show_default=True,
)
@click.option("--kind", default=None, help="Only alerts of this anomaly kind.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--group-by", default=None, help="Group by these labels (e.g. kind,run): a row per group."
)
def alerts(
    server_url: str,
    token: str | None,
    run_id: str | None,
    state: str,
    kind: str | None,
    limit: int,
    group_by: str | None,
) -> None:
    """List the collector's alerts (latest state of each), newest first, or their groups."""
    from rich.console import Console

    from .server._alerts_client import alert_groups_table, alerts_table

    with _client(server_url, token) as client:
        if group_by:
            Console().print(alert_groups_table(client.groups(group_by, run_id, state, kind)))
            return
        found = client.alerts(run=run_id, state=state, kind=kind, limit=limit)
    Console().print(alerts_table(found))


@main.group()
def silence() -> None:
    """Mute alerts for a while: add, list and expire silences on a collector."""


@silence.command("add")
@click.argument("matchers", nargs=-1, required=True)
@click.option("--duration", required=True, help="How long, e.g. 30m, 2h, 1d.")
@click.option("--comment", default="", help="Why (shown with the silence).")
@click.option("--by", "created_by", default=None, help="Who [default: the user name].")
@_client_options
def silence_add(
    matchers: tuple[str, ...],
    duration: str,
    comment: str,
    created_by: str | None,
    server_url: str,
    token: str | None,
) -> None:
    """Silence alerts matching every MATCHER (label=value, !=, =~regex, !~regex)."""
    import getpass

    from .detect._yaml_fields import parse_duration

    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--duration") from None
    with _client(server_url, token) as client:
        made = client.add_silence(matchers, seconds, comment, created_by or getpass.getuser())
    click.echo(f"silence {made['id']} until {made['ends']:.0f}: {' '.join(made['matchers'])}")


@silence.command("list")
@click.option("--all", "include_ended", is_flag=True, help="Expired silences too.")
@_client_options
def silence_list(include_ended: bool, server_url: str, token: str | None) -> None:
    """List the silences in force (or all of them)."""
    from rich.console import Console

    from .server._alerts_client import silences_table

    with _client(server_url, token) as client:
        found = client.silences(include_ended)
    Console().print(silences_table(found))


@silence.command("expire")
@click.argument("silence_id")
@_client_options
def silence_expire(silence_id: str, server_url: str, token: str | None) -> None:
    """End silence SILENCE_ID now."""
    with _client(server_url, token) as client:
        client.expire_silence(silence_id)
    click.echo(f"silence {silence_id} expired")


@main.group()
def actions() -> None:
    """Remediation playbook runs: list them, request one, approve or reject a pending one."""


@actions.command("list")
@_client_options
@click.option("--run", "run_id", default=None, help="Only the actions on this run.")
@click.option("--state", default=None, help="Only actions in this state (e.g. pending).")
def actions_list(server_url: str, token: str | None, run_id: str | None, state: str | None) -> None:
    """List the actions, newest first."""
    from rich.console import Console

    from .server._actions_client import actions_table

    with _client(server_url, token) as client:
        found = client.actions(run=run_id, state=state)
    Console().print(actions_table(found))


@actions.command("run")
@click.argument("playbook")
@click.argument("labels", nargs=-1)
@click.option("--dry-run/--for-real", default=None, help="Override the entry's own choice.")
@click.option("--by", default=None, help="Who asks [default: the user name].")
@_client_options
def actions_run(
    playbook: str,
    labels: tuple[str, ...],
    dry_run: bool | None,
    by: str | None,
    server_url: str,
    token: str | None,
) -> None:
    """Request a run of PLAYBOOK on the entity of LABELS (node=n1 gpu=3 ...)."""
    import getpass

    given = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} must look like key=value", param_hint="LABELS")
        given[key] = value
    with _client(server_url, token) as client:
        made = client.request(playbook, given, by or getpass.getuser(), dry_run)
    click.echo(f"action {made['id']} {made['state']}: {made['command']}")


def _decision_command(verb: str, who: str, doc: str) -> None:
    """``stepwatch actions VERB ACTION_ID``: approve or reject a pending action."""

    @actions.command(verb, help=doc)
    @click.argument("action_id")
    @click.option("--by", default=None, help=f"Who {who} [default: the user name].")
    @click.option("--comment", default="", help="Why.")
    @_client_options
    def decide(
        action_id: str, by: str | None, comment: str, server_url: str, token: str | None
    ) -> None:
        import getpass

        with _client(server_url, token) as client:
            done = client.decide(action_id, verb, by or getpass.getuser(), comment)
        click.echo(f"action {done['id']} {done['state']} by {done['decided_by']}")


_decision_command("approve", "approves", "Approve pending action ACTION_ID: it runs for real.")
_decision_command("reject", "rejects", "Reject pending action ACTION_ID: it never runs.")


@main.command()
@_client_options
@click.option("--run", "run_id", default=None, help="Only records about this run.")
@click.option(
    "--action",
    default=None,
    help="Only this kind of record: notify, command, approval, playbook, policy.",
)
@click.option("--kind", default=None, help="Only records about alerts of this kind.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
def audit(
    server_url: str,
    token: str | None,
    run_id: str | None,
    action: str | None,
    kind: str | None,
    limit: int,
) -> None:
    """Print the audit trail, newest first: who acted, on what, why, with what result."""
    from rich.console import Console

    from .server._actions_client import audit_table

    with _client(server_url, token) as client:
        found = client.audit(run=run_id, action=action, kind=kind, limit=limit)
    Console().print(audit_table(found))


@main.group()
def rules() -> None:
    """Check detection rule files."""


@rules.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def rules_check(files: tuple[Path, ...]) -> None:
    """Validate rule FILES: each mistake is reported as file:line: field: what was expected."""
    from .detect import DETECTORS, RuleError, load_rules

    failed = False
    for path in files:
        try:
            count = len(load_rules(path, DETECTORS))
        except RuleError as exc:
            click.echo(str(exc), err=True)
            failed = True
        else:
            click.echo(f"{path}: {count} rules OK")
    if failed:
        sys.exit(1)


@rules.command("test")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def rules_test(files: tuple[Path, ...]) -> None:
    """Run rule unit tests (input series, expected alerts), like `promtool test rules`."""
    from .detect import DETECTORS, RuleError, builtin_rules, run_rule_tests

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
    "rules_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Rule file [default: the built-in pack].",
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
    rules_path: Path | None,
    out_path: Path | None,
    run_id: str | None,
    score_alerts: bool,
) -> None:
    """Run detection over recorded PATHS (scenario folders, Parquet exports, a store file)."""
    import time

    from rich.progress import Progress

    from .detect import (
        DETECTORS,
        RuleError,
        builtin_rules,
        describe,
        load_rules,
        score,
        to_record,
        write_alerts,
    )
    from .detect import replay as replay_run

    if out_path is None and not score_alerts:
        raise click.UsageError("give --out FILE, --score, or both")
    try:
        rules = load_rules(rules_path, DETECTORS) if rules_path else builtin_rules()
    except RuleError as exc:
        raise click.ClickException(str(exc)) from None
    total = sum(describe(p, run=run_id).samples for p in paths)
    records = []
    started = time.perf_counter()
    with Progress(transient=True) as progress:
        task = progress.add_task("replaying", total=total)
        for path in paths:
            advance = lambda n: progress.advance(task, n)  # noqa: E731
            records += [
                to_record(a) for a in replay_run(path, rules, run=run_id, on_samples=advance)
            ]
    elapsed = time.perf_counter() - started
    if out_path is not None:
        write_alerts(out_path, records)
    click.echo(
        f"{len(records)} alerts from {total:,} samples in {elapsed:.1f} s "
        f"({total / max(elapsed, 1e-9):,.0f} samples/s)" + (f" -> {out_path}" if out_path else "")
    )
    if score_alerts:
        labelled = [p for p in paths if (p / "labels.json").is_file()]
        if not labelled:
            raise click.ClickException("--score needs scenario folders with a labels.json")
        click.echo(score(records, labelled).table())


@main.group()
def export() -> None:
    """Export data out of the store."""


@export.command("parquet")
@click.argument("run_id")
@_store_option(exists=True)
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


@main.command()
@click.argument("run_id", required=False)
@_client_options
@click.option(
    "--interval",
    default=2.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds between refreshes.",
)
@click.option("--once", is_flag=True, help="Print one frame and exit.")
def top(
    run_id: str | None, server_url: str, token: str | None, interval: float, once: bool
) -> None:
    """Live terminal view of RUN (default: the latest running one); q or Ctrl-C quits."""
    from .top import TopError, watch

    try:
        watch(server_url, run_id, token=token, interval_s=interval, once=once)
    except TopError as exc:
        raise click.ClickException(str(exc)) from None


if __name__ == "__main__":
    main()
