"""Commands that talk to a running collector: alerts, silences, remediation actions, the audit
trail and the `top` terminal view."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._text import plural

if TYPE_CHECKING:
    from .._encryption import EncryptionKey
from ._base import (
    _clear_errors,
    _client,
    _client_errors,
    _client_options,
    _client_tls,
    _store_option,
    main,
)


def _json_option(fn: Callable[..., None]) -> Callable[..., None]:
    """``--json``: the API's objects as a JSON array, for scripts, instead of a table."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print the API's objects as a JSON array."
    )(fn)


def _show(found: Sequence[Any], as_json: bool, table: Callable[[Sequence[Any]], Any]) -> None:
    """The API's objects as a JSON array (``--json``), else as a table; an empty table is its
    title alone ("0 alerts"), not a box around nothing."""
    if as_json:
        import json

        click.echo(json.dumps(list(found), indent=2))
        return
    from rich.console import Console

    shown = table(found)
    Console().print(shown if found else shown.title)


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
    "--group-by",
    default=None,
    help="Group by kind, severity or labels (e.g. kind,run): a row per group.",
)
@click.option(
    "--incidents",
    "as_incidents",
    is_flag=True,
    help="The alerts as incidents (a fault and its symptoms), each with its root cause and "
    "why; --state open: those still firing.",
)
@_json_option
def alerts(
    server_url: str,
    token: str | None,
    run_id: str | None,
    state: str,
    kind: str | None,
    limit: int,
    group_by: str | None,
    as_incidents: bool,
    as_json: bool,
) -> None:
    """List the collector's alerts (latest state of each), newest first, their groups, or
    the incidents they make."""
    from ._tables import alert_groups_table, alerts_table, incidents_table, unknown_group_labels

    with _client(server_url, token) as client:
        if as_incidents:
            chosen = "open" if state == "open" else "all"
            return _show(client.incidents(run_id, chosen), as_json, incidents_table)
        if not group_by:
            found = client.alerts(run=run_id, state=state, kind=kind, limit=limit)
            return _show(found, as_json, alerts_table)
        groups = client.groups(group_by, run_id, state, kind)
    wrong = unknown_group_labels([k.strip() for k in group_by.split(",")], groups)
    if wrong:
        raise click.BadParameter(wrong, param_hint="--group-by")
    _show(groups, as_json, alert_groups_table)


@main.group()
def silence() -> None:
    """Mute alerts for a while: add, list and expire silences on a collector."""


@silence.command("add")
@click.argument("matchers", nargs=-1, required=True)
@click.option("--duration", required=True, help="How long, e.g. 30m, 2h, 1d.")
@click.option("--comment", default="", help="Why (shown with the silence).")
@_client_options
def silence_add(
    matchers: tuple[str, ...], duration: str, comment: str, server_url: str, token: str | None
) -> None:
    """Silence alerts matching every MATCHER (label=value, !=, =~regex, !~regex)."""
    from ..detect import parse_duration
    from ._tables import human_time

    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--duration") from None
    with _client(server_url, token) as client:
        made = client.add_silence(matchers, seconds, comment)
    click.echo(
        f"silence {made['id']} until {human_time(made['ends'])}: {' '.join(made['matchers'])}"
    )


@silence.command("list")
@click.option("--all", "include_ended", is_flag=True, help="Expired silences too.")
@_client_options
@_json_option
def silence_list(include_ended: bool, server_url: str, token: str | None, as_json: bool) -> None:
    """List the silences in force (or all of them)."""
    from ._tables import silences_table

    with _client(server_url, token) as client:
        found = client.silences(include_ended)
    _show(found, as_json, silences_table)


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
    """Remediation playbook runs: list or show them, request one, approve or reject one."""


@actions.command("list")
@_client_options
@click.option("--run", "run_id", default=None, help="Only the actions on this run.")
@click.option("--state", default=None, help="Only actions in this state (e.g. pending).")
@_json_option
def actions_list(
    server_url: str, token: str | None, run_id: str | None, state: str | None, as_json: bool
) -> None:
    """List the actions, newest first."""
    from ._tables import actions_table

    with _client(server_url, token) as client:
        found = client.actions(run=run_id, state=state)
    _show(found, as_json, actions_table)


@actions.command("show")
@click.argument("action_id")
@_client_options
def actions_show(action_id: str, server_url: str, token: str | None) -> None:
    """Show action ACTION_ID: its command, state, who asked and decided, its output's end."""
    from ._tables import action_text

    with _client(server_url, token) as client:
        click.echo(action_text(client.action(action_id)))


@actions.command("run")
@click.argument("playbook")
@click.argument("labels", nargs=-1)
@click.option("--dry-run/--for-real", default=None, help="Override the entry's own choice.")
@_client_options
def actions_run(
    playbook: str,
    labels: tuple[str, ...],
    dry_run: bool | None,
    server_url: str,
    token: str | None,
) -> None:
    """Request a run of PLAYBOOK on the entity of LABELS (node=n1 gpu=3 ...)."""
    given = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} must look like key=value", param_hint="LABELS")
        given[key] = value
    with _client(server_url, token) as client:
        made = client.request_action(playbook, given, dry_run)
    click.echo(f"action {made['id']} {made['state']}: {made['command']}")


def _decision_command(verb: str, doc: str) -> None:
    """``stepwatch actions VERB ACTION_ID``: approve or reject a pending action (the token
    says who decides)."""

    @actions.command(verb, help=doc)
    @click.argument("action_id")
    @click.option("--comment", default="", help="Why.")
    @_client_options
    def decide(action_id: str, comment: str, server_url: str, token: str | None) -> None:
        with _client(server_url, token) as client:
            done = client.decide(action_id, verb, comment)
        click.echo(f"action {done['id']} {done['state']} by {done['decided_by']}")


_decision_command(
    "approve",
    "Approve pending action ACTION_ID (as an admin other than its requester): it runs for "
    "real once it has the approvals its playbook needs.",
)
_decision_command("reject", "Reject pending action ACTION_ID: it never runs.")


@main.group(invoke_without_command=True)
@_client_options
@click.option("--run", "run_id", default=None, help="Only records about this run.")
@click.option(
    "--action",
    default=None,
    help="Only this kind of record: notify, command, approval, playbook, policy.",
)
@click.option("--kind", default=None, help="Only records about alerts of this kind.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@_json_option
@click.pass_context
def audit(
    ctx: click.Context,
    server_url: str,
    token: str | None,
    run_id: str | None,
    action: str | None,
    kind: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Print the audit trail, newest first: who acted, on what, why, with what result; then
    the head of the records' hash chain, to write down elsewhere (`audit verify` checks it)."""
    from ..act import AUDIT_ACTIONS
    from ._tables import audit_table

    if ctx.invoked_subcommand is not None:
        return
    if action is not None and action not in AUDIT_ACTIONS:
        raise click.BadParameter(
            f"{action!r} is not one of {', '.join(AUDIT_ACTIONS)}", param_hint="--action"
        )
    with _client(server_url, token) as client:
        found = client.audit(run=run_id, action=action, kind=kind, limit=limit)
        head = client.audit_head()
    _show(found, as_json, audit_table)
    if not as_json:
        click.echo(f"chain head: record {head['seq']} sha256 {head['hash']}")


@audit.command("verify")
@_store_option(exists=True)
def audit_verify(store_path: Path, encryption_key: EncryptionKey | None) -> None:
    """Re-compute the hash chain of the store's records (audit, alerts, silences, commands,
    actions): exit 1 naming the first record changed, removed or reordered; else the head."""
    from ..store import Store

    with _clear_errors(), Store(store_path, key=encryption_key) as store:
        check = store.verify_records()
    if check.problem is not None:
        raise click.ClickException(f"{store_path}: {check.problem}")
    head = check.head
    click.echo(f"{store_path}: {plural(check.records, 'record')} intact")
    click.echo(f"chain head: record {head.seq} sha256 {head.hash}")


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
    from ..top import watch

    with _client_errors():
        watch(server_url, run_id, token=token, tls=_client_tls(), interval_s=interval, once=once)


@main.command()
@click.argument("run_id", metavar="RUN")
@click.option("--steps", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option(
    "--rank",
    "ranks",
    multiple=True,
    type=click.IntRange(min=0),
    help="Profile this rank only (repeat for several) [default: every rank].",
)
@click.option(
    "--wait",
    "wait_s",
    default=0.0,
    type=click.FloatRange(min=0),
    metavar="S",
    help="Wait up to S seconds for the trace (one of each --rank), then download it.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the trace, with one --rank at most [default: RUN-ID.json.gz].",
)
@_client_options
def profile(
    run_id: str,
    steps: int,
    ranks: tuple[int, ...],
    wait_s: float,
    out: Path | None,
    server_url: str,
    token: str | None,
) -> None:
    """Ask RUN to profile its next steps (torch.profiler) and upload the trace; with --wait,
    download it (`stepwatch trace FILE` analyses it, Perfetto shows it)."""
    import time

    wanted = sorted(set(ranks))
    if out is not None and len(wanted) > 1:
        raise click.BadParameter("names one file: give one --rank at most", param_hint="--out")
    with _client(server_url, token) as client:
        before = {p["id"] for p in client.profiles(run_id)}
        sent = client.command(run_id, "profile", {"steps": steps}, ranks=wanted)
        where = f" on rank{'s' if len(wanted) > 1 else ''} {', '.join(map(str, wanted))}"
        click.echo(
            f"asked run {run_id} to profile {steps} steps{where if wanted else ''} "
            f"(command {sent['id']})"
        )
        deadline = time.monotonic() + wait_s
        due = {str(r) for r in wanted}
        while wait_s and time.monotonic() < deadline:
            for p in client.profiles(run_id)[::-1]:  # oldest first
                if p["id"] in before or (due and p["rank"] not in due):
                    continue
                before.add(p["id"])
                due.discard(p["rank"])
                path = out or Path(f"{run_id}-{p['id']}.json.gz")
                path.write_bytes(client.profile_trace(run_id, p["id"]))
                click.echo(
                    f"trace of rank {p['rank']}, steps {p['first_step']}+{p['steps']} in {path}"
                )
                if not due:
                    return
            time.sleep(1.0)
    if wait_s:
        missing = f" of rank {', '.join(sorted(due, key=int))}" if due else ""
        raise click.ClickException(f"no trace{missing} came within {wait_s:g} s")
