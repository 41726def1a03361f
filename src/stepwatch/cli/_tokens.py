"""`stepwatch token create | list | revoke`: on a store before its collector starts, or through
a running collector's API with an admin token."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import click

if TYPE_CHECKING:
    from .._encryption import EncryptionKey

from ._base import _clear_errors, _client, _server_url, _store_option, main


class _Tokens(Protocol):
    """What each place tokens live in can do: the store file, or a collector's API."""

    def tokens(self) -> list[dict[str, Any]]: ...

    def create_token(
        self, role: str, projects: Sequence[str], name: str | None, expires: str | None
    ) -> dict[str, Any]: ...

    def revoke_token(self, key: str) -> dict[str, Any]: ...


class _StoreTokens:
    """The tokens of a store file no collector holds, as the API would show them."""

    def __init__(self, book: Any) -> None:
        self._book = book

    def tokens(self) -> list[dict[str, Any]]:
        return [t.as_json() for t in self._book.tokens()]

    def create_token(
        self, role: str, projects: Sequence[str], name: str | None, expires: str | None
    ) -> dict[str, Any]:
        from ..detect import parse_duration

        lifetime = None if expires is None else parse_duration(expires)
        record, secret = self._book.create(
            role, projects, name=name, expires_in_s=lifetime, by="stepwatch token create"
        )
        return {**record.as_json(), "token": secret}

    def revoke_token(self, key: str) -> dict[str, Any]:
        return dict(self._book.revoke(key, by="stepwatch token revoke").as_json())


@contextmanager
def _tokens(
    store_path: Path, key: EncryptionKey | None, server_url: str | None, token: str | None
) -> Iterator[_Tokens]:
    """The store's tokens, or with ``--server`` the collector's (an admin token needed)."""
    if server_url is not None:
        with _client(server_url, token) as client:
            yield client
        return
    from ..auth import TokenBook, TokenError
    from ..store import Store

    with _clear_errors(), Store(store_path, key=key) as store:
        try:
            yield _StoreTokens(TokenBook(store))
        except TokenError as exc:
            raise click.ClickException(str(exc)) from None


def _where(fn: Callable[..., None]) -> Callable[..., None]:
    """``--store FILE`` (default) or ``--server URL --token ADMIN_TOKEN``."""
    fn = click.option("--token", envvar="STEPWATCH_TOKEN", default=None, help="An admin token.")(fn)
    fn = click.option(
        "--server",
        "server_url",
        default=None,
        callback=_server_url,
        help="Work through this running collector's API instead of the store file.",
    )(fn)
    return _store_option(help="The store whose tokens these are (no collector may hold it).")(fn)


@main.group()
def token() -> None:
    """API tokens: each names someone, with a role over some projects."""


@token.command("create")
@_where
@click.option("--project", "projects", multiple=True, required=True, help="Repeatable; '*': all.")
@click.option("--role", required=True, type=click.Choice(["ingest", "viewer", "operator", "admin"]))
@click.option("--name", default=None, help="Default: ROLE-ID.")
@click.option("--expires", default=None, help="Lifetime, e.g. 30d or 12h (default: none).")
def create(
    store_path: Path,
    encryption_key: EncryptionKey | None,
    server_url: str | None,
    token: str | None,
    projects: tuple[str, ...],
    role: str,
    name: str | None,
    expires: str | None,
) -> None:
    """Make a token; it is printed once, as the last line, and never shown again."""
    with _tokens(store_path, encryption_key, server_url, token) as place:
        made = place.create_token(role, projects, name, expires)
    click.echo(f"token {made['name']} ({made['id']}): {role} of {', '.join(made['projects'])}")
    click.echo("keep it now: only its hash is stored, it cannot be shown again")
    click.echo(made["token"])


@token.command("list")
@_where
def list_tokens(
    store_path: Path,
    encryption_key: EncryptionKey | None,
    server_url: str | None,
    token: str | None,
) -> None:
    """Every token: id, name, role, projects, and whether it is active."""
    from rich.console import Console

    from ._tables import human_time, titled_table

    with _tokens(store_path, encryption_key, server_url, token) as place:
        found = place.tokens()
    table = titled_table("tokens", ("id", "name", "role", "projects", "created", "state"))
    for t in found:
        state = "active"
        if t["revoked"] is not None:
            state = f"revoked {human_time(t['revoked'])}"
        elif t["expires"] is not None:
            state = f"expires {human_time(t['expires'])}"
        created = human_time(t["created"])
        table.add_row(t["id"], t["name"], t["role"], ", ".join(t["projects"]), created, state)
    Console().print(table)


@token.command("revoke")
@_where
@click.argument("key")
def revoke(
    store_path: Path,
    encryption_key: EncryptionKey | None,
    server_url: str | None,
    token: str | None,
    key: str,
) -> None:
    """Revoke the token with this id or name: it opens nothing from now on."""
    with _tokens(store_path, encryption_key, server_url, token) as place:
        gone = place.revoke_token(key)
    click.echo(f"token {gone['name']} ({gone['id']}) revoked")
