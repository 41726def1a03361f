"""The `stepwatch` group and what its commands share: store, rules and notify options, the
client options of commands that talk to a collector, and errors made one line for the user."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import click

if TYPE_CHECKING:
    from .._encryption import EncryptionKey
    from ..client import CollectorClient
    from ..spool import ClientTls
    from ..store import StoreError

__all__ = ["DEFAULT_STORE", "main"]

DEFAULT_STORE = Path("stepwatch.duckdb")


def _store_option(
    default: Path = DEFAULT_STORE, exists: bool = False, help: str | None = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--store FILE``: the DuckDB file a command opens, and the key it is encrypted with."""
    store = click.option(
        "--store",
        "store_path",
        type=click.Path(exists=exists, path_type=Path),
        default=default,
        show_default=True,
        help=help,
    )
    return lambda fn: store(_encryption_option(fn))


def _encryption_key(
    ctx: click.Context, param: click.Parameter, value: Path | None
) -> EncryptionKey | None:
    """The key the option, $STEPWATCH_ENCRYPTION_KEY_FILE or $STEPWATCH_ENCRYPTION_KEY give."""
    import os

    from .._encryption import EncryptionError, resolve_key

    try:
        return resolve_key(value, os.environ)
    except EncryptionError as exc:
        raise click.ClickException(str(exc)) from None


def _encryption_option(fn: Callable[..., None]) -> Callable[..., None]:
    """``--encryption-key-file FILE``: the key of an encrypted store and of sealed spools."""
    return click.option(
        "--encryption-key-file",
        "encryption_key",
        envvar="STEPWATCH_ENCRYPTION_KEY_FILE",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        callback=_encryption_key,
        help="Key file (`stepwatch key create`) that encrypts the store and seals spools "
        "(env STEPWATCH_ENCRYPTION_KEY_FILE, or the key itself in STEPWATCH_ENCRYPTION_KEY).",
    )(fn)


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
    from ..detect import RuleError

    try:
        yield
    except RuleError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="stepwatch")
def main() -> None:
    """Watch large-model training runs while they happen and keep them healthy."""


@contextmanager
def _clear_errors() -> Iterator[None]:
    """A store or port another process holds, a missing GPU or program, a bad option value:
    one line for the user (and the exit code the error asks for), not a traceback."""
    from ..collect import GpuUnavailable
    from ..store import StoreError

    try:
        yield
    except StoreError as exc:
        raise click.ClickException(_with_readers(exc)) from None
    except (GpuUnavailable, ValueError, OSError) as exc:
        error = click.ClickException(str(exc))
        error.show()
        raise SystemExit(getattr(exc, "exit_code", error.exit_code)) from None


def _with_readers(exc: StoreError) -> str:
    """A store another process holds: which collector that is, and how to read it meanwhile."""
    if exc.holder is None:
        return str(exc)
    url = _listening_url(exc.holder)
    api = f"that collector's API (--server {url})" if url else "its collector's API (--server URL)"
    return f"{exc}: read it through {api}, or copy the file (and its .wal) and open the copy"


def _listening_url(pid: int) -> str | None:
    """The HTTP address process ``pid`` listens on (a collector does), if it listens at all."""
    import psutil

    try:
        sockets = psutil.Process(pid).net_connections(kind="inet")
    except psutil.Error:
        return None
    for sock in sockets:
        if sock.status == psutil.CONN_LISTEN:
            host, port = sock.laddr[:2]
            host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
            return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    return None


def _server_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--server`` must be a URL: a bare ``host:port`` is refused, not guessed at."""
    parts = urlsplit(value or "")
    if value is None or (parts.scheme in ("http", "https") and parts.netloc):
        return value
    guess = f" (did you mean http://{value}?)" if "://" not in value else ""
    raise click.ClickException(
        f"--server {value}: a collector URL starts with http:// or https://{guess}"
    )


def _broker_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--transport`` must name a broker: ``amqp://`` or ``amqps://``."""
    from .._redact import redact_url
    from ..wire import is_broker_url

    if value is None or is_broker_url(value):
        return value
    raise click.ClickException(
        f"--transport: a broker URL starts with amqp:// or amqps://, got {redact_url(value)}"
    )


@contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM (systemd, Kubernetes, `kill`) stops as cleanly as Ctrl-C."""
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: The TLS options of every client: (flag, environment variable, help).
_TLS_OPTIONS = (
    ("--ca-file", "STEPWATCH_CA_FILE", "CA that signed an https:// collector's certificate"),
    ("--client-cert", "STEPWATCH_CLIENT_CERT", "Mutual TLS: this client's certificate"),
    ("--client-key", "STEPWATCH_CLIENT_KEY", "Mutual TLS: its private key"),
)
_TLS_META = "stepwatch.client_tls"


def _keep_tls(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    """Keep a TLS option in the context, for ``_client_tls``: no command signature changes."""
    if value is not None and param.name is not None:
        ctx.meta.setdefault(_TLS_META, {})[param.name] = value


def _tls_options(fn: Callable[..., None]) -> Callable[..., None]:
    """``--ca-file``, ``--client-cert``, ``--client-key``: how a client trusts an https://
    collector and, for mutual TLS, proves who it is (read back with ``_client_tls``)."""
    for flag, env, help in reversed(_TLS_OPTIONS):
        fn = click.option(
            flag,
            envvar=env,
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            expose_value=False,
            callback=_keep_tls,
            help=f"{help} (PEM; env {env}).",
        )(fn)
    return fn


def _client_tls() -> ClientTls:
    """The TLS options of the running command, its files checked now (one line if wrong)."""
    from ..spool import ClientTls

    tls = ClientTls(**click.get_current_context().meta.get(_TLS_META, {}))
    if tls != ClientTls():
        try:
            tls.context()
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    return tls


def _client_options(fn: Callable[..., None]) -> Callable[..., None]:
    """``--server``, ``--token`` and the TLS options of the commands that talk to a running
    collector."""
    fn = _tls_options(fn)
    fn = click.option("--token", envvar="STEPWATCH_TOKEN", default=None)(fn)
    return click.option(
        "--server",
        "server_url",
        envvar="STEPWATCH_SERVER",
        default="http://127.0.0.1:7070",
        show_default=True,
        callback=_server_url,
        help="Collector URL (env STEPWATCH_SERVER).",
    )(fn)


@contextmanager
def _client_errors() -> Iterator[None]:
    """A collector that cannot be reached or refuses: its one line, not a traceback."""
    from ..client import ClientError

    try:
        yield
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None


@contextmanager
def _client(server_url: str, token: str | None) -> Iterator[CollectorClient]:
    """The client of the collector's API with the running command's TLS options; its errors
    are one line for the user."""
    from ..client import CollectorClient

    with _client_errors(), CollectorClient(server_url, token, tls=_client_tls()) as client:
        yield client
