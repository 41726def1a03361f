"""The tokens table: named API tokens, kept as hashes of their secrets, never the secrets."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb

__all__ = ["TokenRecord"]

DDL = """CREATE TABLE IF NOT EXISTS tokens (
    id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, role VARCHAR NOT NULL,
    projects VARCHAR NOT NULL, hash VARCHAR NOT NULL, created DOUBLE NOT NULL,
    expires DOUBLE, revoked DOUBLE, created_by VARCHAR NOT NULL)"""

_COLUMNS = "id, name, role, projects, hash, created, expires, revoked, created_by"


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """One token as stored: who it names, its role and projects (``["*"]``: all), its hash."""

    id: str
    name: str
    role: str
    projects: tuple[str, ...]
    hash: str
    created: float
    expires: float | None = None
    revoked: float | None = None
    created_by: str = ""

    def as_json(self) -> dict[str, Any]:
        """Everything but the hash: what a list of tokens shows."""
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role,
            "projects": list(self.projects),
            "created": self.created,
            "expires": self.expires,
            "revoked": self.revoked,
            "created_by": self.created_by,
        }


def _record(row: tuple[Any, ...]) -> TokenRecord:
    tid, name, role, projects, digest, created, expires, revoked, by = row
    return TokenRecord(
        tid, name, role, tuple(json.loads(projects)), digest, created, expires, revoked, by
    )


def all_tokens(cur: duckdb.DuckDBPyConnection) -> list[TokenRecord]:
    """Every token, revoked ones too, oldest first."""
    rows = cur.execute(f"SELECT {_COLUMNS} FROM tokens ORDER BY created, id").fetchall()
    return [_record(r) for r in rows]


def put_token(cur: duckdb.DuckDBPyConnection, token: TokenRecord) -> None:
    """Insert a token or replace the stored one with the same id (revoking is a replace)."""
    cur.execute(
        f"INSERT OR REPLACE INTO tokens ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            token.id,
            token.name,
            token.role,
            json.dumps(list(token.projects)),
            token.hash,
            token.created,
            token.expires,
            token.revoked,
            token.created_by,
        ],
    )
