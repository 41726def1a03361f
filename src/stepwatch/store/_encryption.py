"""Opening the store's file encrypted: DuckDB's httpfs extension, the key, errors in words.

Why httpfs: DuckDB writes encrypted files only with OpenSSL, which that extension carries; its
built-in cipher reads them but refuses to write them securely. The extension comes as a
package (``duckdb-extension-httpfs``, the signed binary for one DuckDB version), loaded by path,
so nothing is downloaded and DuckDB still checks its signature.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from .._encryption import INSTALL_HINT, EncryptionError, EncryptionKey, missing
from ._errors import StoreError

__all__ = ["ALIAS", "attach", "key_error"]

#: The name the encrypted file is attached under (every cursor selects it with USE).
ALIAS = "stepwatch"
_KEY_OPTIONS = "--encryption-key-file or STEPWATCH_ENCRYPTION_KEY_FILE"


def _httpfs() -> Path:
    """The httpfs extension built for the DuckDB installed here."""
    try:
        import duckdb_extension_httpfs
    except ImportError:
        raise missing("duckdb-extension-httpfs") from None
    version = duckdb.__version__
    folder = Path(duckdb_extension_httpfs.__path__[0]) / "extensions" / f"v{version}"
    found = folder / "httpfs.duckdb_extension"
    if not found.is_file():
        raise EncryptionError(
            f"an encrypted store needs DuckDB's httpfs extension for DuckDB {version}, "
            f"which the installed duckdb-extension-httpfs lacks: {INSTALL_HINT}"
        )
    return found


def attach(path: Path, key: EncryptionKey) -> duckdb.DuckDBPyConnection:
    """A connection whose default database is ``path``, encrypted with the key's store subkey.

    A new file is created encrypted; an existing one opens only with its own key.
    """
    extension = _httpfs()
    secret = key.derive("store").hex()
    con = duckdb.connect()
    try:
        con.execute(f"LOAD {_quoted(str(extension))}")
        con.execute(f"ATTACH {_quoted(str(path))} AS {ALIAS} (ENCRYPTION_KEY '{secret}')")
        con.execute(f"USE {ALIAS}")
    except duckdb.Error as exc:  # ATTACH takes no parameters: keep the key out of any echo
        con.close()
        raise type(exc)(str(exc).replace(secret, "***")) from None
    except BaseException:
        con.close()
        raise
    return con


def _quoted(text: str) -> str:
    """A SQL string literal (ATTACH and LOAD take no parameters)."""
    return "'" + text.replace("'", "''") + "'"


def key_error(path: Path, error: duckdb.Error, key: EncryptionKey | None) -> StoreError | None:
    """What DuckDB's refusal means for the user when it is about the key, else None."""
    text = str(error).lower()
    if "without a key" in text:
        return StoreError(f"store {path} is encrypted: give its key ({_KEY_OPTIONS})")
    if "wrong encryption key" in text and key is not None:
        return StoreError(f"store {path} is encrypted with another key than the {key.origin}")
    if "is not encrypted" in text:
        return StoreError(
            f"store {path} is not encrypted: open it without an encryption key, or give a new "
            "file to start an encrypted store"
        )
    return None
