"""``python -m stepwatch.server``: the collector without the CLI (tests, containers)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from ..detect import RuleError
from ..store import StoreError
from ._app import DEFAULT_MAX_BODY_BYTES
from ._serve import serve


def main(argv: Sequence[str] | None = None, env: dict[str, str] | None = None) -> None:
    """Parse the command line and serve until SIGINT/SIGTERM."""
    env = dict(os.environ) if env is None else env
    parser = argparse.ArgumentParser(prog="python -m stepwatch.server", description=__doc__)
    parser.add_argument("--store", type=Path, default=Path("stepwatch.duckdb"), help="DuckDB file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7070)
    parser.add_argument(
        "--token",
        default=env.get("STEPWATCH_TOKEN"),
        help="require 'Authorization: Bearer TOKEN' (default: env STEPWATCH_TOKEN)",
    )
    parser.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES)
    parser.add_argument(
        "--rules", type=Path, action="append", default=[], help="rule file (repeatable)"
    )
    parser.add_argument(
        "--playbooks", type=Path, default=None, help="allow-list of remediation playbooks"
    )
    parser.add_argument(
        "--notify", type=Path, default=None, help="notifications file: receivers and routes"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        help="a name the collector is reached by, besides its bind address and localhost",
    )
    args = parser.parse_args(argv)
    try:
        serve(
            args.store,
            host=args.host,
            port=args.port,
            token=args.token or None,
            max_body_bytes=args.max_body_bytes,
            rules=args.rules,
            notify=args.notify,
            playbooks=args.playbooks,
            allowed_hosts=args.allowed_host,
        )
    except (RuleError, StoreError, OSError, ValueError) as exc:
        # A mistake in a rule or playbooks file (its file:line), a store another process holds, a
        # port in use: one line, no traceback.
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
