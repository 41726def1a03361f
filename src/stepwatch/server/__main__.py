"""``python -m stepwatch.server``: the collector without the CLI (tests, containers)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from .._durable import DEFAULT_CHECKPOINT_INTERVAL_S
from .._encryption import ENV_KEY_FILE, EncryptionError, resolve_key
from .._tls import ServerTls
from ..detect import RuleError
from ..store import StoreError
from ._app import DEFAULT_MAX_BODY_BYTES
from ._serve import serve
from ._upkeep import store_limits


def main(argv: Sequence[str] | None = None, env: dict[str, str] | None = None) -> None:
    """Parse the command line and serve until SIGINT/SIGTERM."""
    env = dict(os.environ) if env is None else env
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
    parser.add_argument(
        "--encryption-key-file",
        type=Path,
        default=env.get(ENV_KEY_FILE),
        help="key of an encrypted store (default: env STEPWATCH_ENCRYPTION_KEY_FILE, "
        "else the key in STEPWATCH_ENCRYPTION_KEY)",
    )
    parser.add_argument("--tls-cert", type=Path, default=None, help="serve HTTPS: certificate")
    parser.add_argument("--tls-key", type=Path, default=None, help="its private key")
    parser.add_argument(
        "--tls-client-ca", type=Path, default=None, help="mutual TLS: CA of client certificates"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        help="a name the collector is reached by, besides its bind address and localhost",
    )
    parser.add_argument(
        "--checkpoint-interval",
        type=float,
        default=DEFAULT_CHECKPOINT_INTERVAL_S,
        help="seconds between checkpoints of the detection state (and one at shutdown)",
    )
    parser.add_argument(
        "--metrics-public",
        action="store_true",
        help="serve /metrics without a token even with --auth (it names no run nor project)",
    )
    parser.add_argument("--retention", default=None, help="KIND=AGE,... (see stepwatch server)")
    parser.add_argument("--max-store-bytes", default=None, help="SIZE or PCT%% of the file system")
    parser.add_argument(
        "--upkeep-interval", type=float, default=10.0, help="seconds between store size checks"
    )
    args = parser.parse_args(argv)
    try:
        retention, disk_cap = store_limits(args.retention, args.max_store_bytes)
        serve(
            args.store,
            host=args.host,
            port=args.port,
            auth=args.auth,
            max_body_bytes=args.max_body_bytes,
            rules=args.rules,
            notify=args.notify,
            playbooks=args.playbooks,
            key=resolve_key(args.encryption_key_file, env),
            tls=ServerTls.of(args.tls_cert, args.tls_key, args.tls_client_ca),
            allowed_hosts=args.allowed_host,
            checkpoint_interval_s=args.checkpoint_interval,
            metrics_public=args.metrics_public,
            retention=retention,
            disk_cap=disk_cap,
            upkeep_interval_s=args.upkeep_interval,
        )
    except (RuleError, StoreError, EncryptionError, OSError, ValueError) as exc:
        # A mistake in a rule or playbooks file (its file:line), a store another process holds, a
        # port in use, a key that is not the store's, a certificate that cannot be loaded: one
        # line, no traceback.
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
