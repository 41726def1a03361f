"""Opening the store's file: DuckDB's errors made StoreErrors that say what and who."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import duckdb

from .._encryption import EncryptionKey
from . import _encryption
from ._errors import StoreError
from ._schema import upgrade

log = logging.getLogger("stepwatch.store")


def _lock_holder(message: str) -> int | None:
    """The PID DuckDB names when another process holds the file's lock ("... (PID 123)")."""
    found = re.search(r"lock.*\(PID (\d+)\)", message, re.IGNORECASE | re.DOTALL)
    return int(found.group(1)) if found else None


def connect(
    path: Path, key: EncryptionKey | None = None, memory_limit: int | None = None
) -> duckdb.DuckDBPyConnection:
    """Open the file (encrypted under ``key`` when given), DuckDB's memory held to
    ``memory_limit`` bytes (None: DuckDB's default, 80 % of RAM), and bring its schema up to
    this code's version, turning DuckDB's errors into a StoreError that says what."""
    try:
        con = duckdb.connect(str(path)) if key is None else _encryption.attach(path, key)
        if memory_limit is not None:
            con.execute(f"SET memory_limit = '{int(memory_limit)}B'")
    except duckdb.Error as e:
        if (holder := _lock_holder(str(e))) is not None:
            message = f"store {path} is in use by another process (PID {holder})"
            raise StoreError(message, holder) from e
        if (refused := _encryption.key_error(path, e, key)) is not None:
            raise refused from None
        hint = " (is another process using it?)" if "lock" in str(e).lower() else ""
        raise StoreError(f"cannot open store {path}{hint}: {e}") from e
    try:
        before, after = upgrade(con)
    except (duckdb.Error, StoreError) as e:
        con.close()
        raise StoreError(f"cannot use store {path}: {e}") from e
    if 0 < before < after:
        log.warning("store %s: schema migrated from version %d to %d", path, before, after)
    return con
