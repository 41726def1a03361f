"""Opening the store's file: DuckDB's errors made StoreErrors that say what and who."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from ._errors import StoreError
from ._schema import ensure_schema


def _lock_holder(message: str) -> int | None:
    """The PID DuckDB names when another process holds the file's lock ("... (PID 123)")."""
    found = re.search(r"lock.*\(PID (\d+)\)", message, re.IGNORECASE | re.DOTALL)
    return int(found.group(1)) if found else None


def connect(path: Path) -> duckdb.DuckDBPyConnection:
    """Open and check the file, turning DuckDB's errors into a StoreError that says what."""
    try:
        con = duckdb.connect(str(path))
    except duckdb.Error as e:
        if (holder := _lock_holder(str(e))) is not None:
            message = f"store {path} is in use by another process (PID {holder})"
            raise StoreError(message, holder) from e
        hint = " (is another process using it?)" if "lock" in str(e).lower() else ""
        raise StoreError(f"cannot open store {path}{hint}: {e}") from e
    try:
        ensure_schema(con)
    except (duckdb.Error, StoreError) as e:
        con.close()
        raise StoreError(f"cannot use store {path}: {e}") from e
    return con
