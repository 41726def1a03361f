"""`stepwatch key create FILE`: a new encryption key for the store and the spools."""

from __future__ import annotations

from pathlib import Path

import click

from ._base import main


@main.group()
def key() -> None:
    """Encryption keys: the store and the spools at rest (--encryption-key-file)."""


@key.command("create")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def key_create(path: Path) -> None:
    """Write a new random key to PATH (readable by its owner only; never over a file)."""
    from .._encryption import EncryptionError, create_key_file

    try:
        create_key_file(path)
    except EncryptionError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"wrote a new key to {path}: give it to the collector, agents, `stepwatch sync` "
        "(--encryption-key-file) and training jobs (STEPWATCH_ENCRYPTION_KEY_FILE); "
        "keep a copy elsewhere, since nothing encrypted with it opens without it"
    )
