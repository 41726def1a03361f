"""Where people look at a run: its overview in the dashboard, and the command that serves a
stored run again. The demo and ``stepwatch run`` print the same words."""

from __future__ import annotations

import shlex
from pathlib import Path
from urllib.parse import quote

__all__ = ["DEFAULT_PORT", "look_again", "run_link"]

#: The collector's port when none is given (``stepwatch server``, ``demo`` and ``run``).
DEFAULT_PORT = 7070


def run_link(server: str, run_id: str) -> str:
    """The dashboard's overview of one run (its hash route)."""
    return f"{server.rstrip('/')}/#/overview?run={quote(run_id)}"


def look_again(store: Path, run_id: str) -> str:
    """How to open a run after its collector stopped: serve its store, then its link."""
    serve = f"stepwatch server --store {shlex.quote(str(store))}"
    link = run_link(f"http://127.0.0.1:{DEFAULT_PORT}", run_id)
    return f"to look at it again: {serve}, then open {link}"
