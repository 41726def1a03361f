"""``python -m stepwatch.server``: the collector without the CLI (tests, containers)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ..detect import RuleError
from ..store import StoreError
from ._app import DEFAULT_MAX_BODY_BYTES
from ._serve import serve


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m stepwatch.server", description=__doc__)
    parser.add_argument("--store", type=Path, default=Path("stepwatch.duckdb"), help="DuckDB file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7070)
    parser.add_argument(
        "--auth",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="require tokens (default: on unless --host is a loopback address)",
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
    args = parser.parse_args(argv)
    try:
        serve(
            args.store,
            host=args.host,
            port=args.port,
            auth=args.auth,
            max_body_bytes=args.max_body_bytes,
            rules=args.rules,
            notify=args.notify,
            playbooks=args.playbooks,
        )
    except (RuleError, StoreError, OSError) as exc:
        # A mistake in a rule or playbooks file (its file:line), a store another process holds, a
        # port in use: one line, no traceback.
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
