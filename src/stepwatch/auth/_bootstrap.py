"""The first admin token: made at the first start with auth, written where only its owner reads."""

from __future__ import annotations

import os
from pathlib import Path

from ._identity import ALL_PROJECTS
from ._roles import Role
from ._tokens import TokenBook

__all__ = ["admin_token_path", "ensure_admin_token"]


def admin_token_path(store_path: Path) -> Path:
    """Where the first admin token goes: beside the store, so it is found with it."""
    return store_path.with_name(store_path.name + ".admin-token")


def ensure_admin_token(book: TokenBook, path: Path) -> Path | None:
    """Make an admin token when none is active and write it to ``path`` (mode 0600).

    Returns the path written, or None when an admin token existed already.
    """
    if book.has_admin():
        return None
    _, secret = book.create(Role.ADMIN, [ALL_PROJECTS], name=None, by="collector start")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT: set it
        os.write(fd, (secret + "\n").encode())
    finally:
        os.close(fd)
    return path
