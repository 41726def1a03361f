"""Named tokens: made once and shown once, kept hashed, revocable, with an optional expiry.

Why SHA-256 and not a slow password hash: the secrets are 256 random bits, so nothing can be
guessed from the hash, and a lookup by hash in memory keeps ingest as fast as without auth.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from ..store import Store, TokenRecord
from ._identity import ALL_PROJECTS, Identity
from ._roles import Role

__all__ = ["TOKEN_PREFIX", "TokenBook", "TokenError", "TokenRefused", "token_digest"]

#: Every token starts so, which lets secret scanners and our own redaction find them.
TOKEN_PREFIX = "swt_"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_PROJECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class TokenError(ValueError):
    """A token cannot be made or revoked as asked (the message says why)."""


class TokenRefused(Exception):
    """A presented token opens nothing: unknown, revoked or expired (the message says which)."""


def token_digest(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _projects(given: Iterable[str]) -> tuple[str, ...]:
    projects = tuple(dict.fromkeys(p.strip() for p in given))
    if not projects:
        raise TokenError("a token needs at least one project (or '*' for every project)")
    if ALL_PROJECTS in projects:
        return (ALL_PROJECTS,)
    for project in projects:
        if not _PROJECT_RE.match(project):
            raise TokenError(f"invalid project name {project!r}: letters, digits and _ . -")
    return projects


@dataclass(frozen=True, slots=True)
class _Lookup:
    record: TokenRecord
    identity: Identity


class TokenBook:
    """The collector's tokens over its store, with every active one in memory by hash."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store, self._clock = store, clock
        self._lock = threading.Lock()
        self._by_hash: dict[str, _Lookup] = {}
        for record in store.tokens():
            self._remember(record)
        #: Told of each token made or revoked here (the fleet passes them on); keep it cheap.
        self.on_change: list[Callable[[TokenRecord], None]] = []

    def _remember(self, record: TokenRecord) -> None:
        projects = None if record.projects == (ALL_PROJECTS,) else frozenset(record.projects)
        identity = Identity(record.name, Role(record.role), projects, record.id)
        self._by_hash[record.hash] = _Lookup(record, identity)

    def create(
        self,
        role: str,
        projects: Iterable[str],
        *,
        name: str | None = None,
        expires_in_s: float | None = None,
        by: str = "",
    ) -> tuple[TokenRecord, str]:
        """A new token and its secret, which is shown now and never again."""
        try:
            chosen = Role(role)
        except ValueError:
            roles = ", ".join(r.value for r in Role)
            raise TokenError(f"unknown role {role!r}: one of {roles}") from None
        if expires_in_s is not None and expires_in_s <= 0:
            raise TokenError("expiry must be in the future")
        token_id = secrets.token_hex(6)
        name = name or f"{chosen.value}-{token_id}"
        if not _NAME_RE.match(name):
            raise TokenError(f"invalid token name {name!r}: letters, digits and _ . @ -")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = self._clock()
        expires = None if expires_in_s is None else now + expires_in_s
        record = TokenRecord(
            token_id,
            name,
            chosen.value,
            _projects(projects),
            token_digest(secret),
            now,
            expires,
            None,
            by,
        )
        with self._lock:
            if any(self._active(x.record, now) and x.record.name == name for x in self._values()):
                raise TokenError(f"a token named {name!r} exists already; revoke it first")
            self._store.put_token(record)
            self._remember(record)
        self._tell(record)
        return record, secret

    def _values(self) -> list[_Lookup]:
        return list(self._by_hash.values())

    def _active(self, record: TokenRecord, now: float) -> bool:
        return record.revoked is None and (record.expires is None or record.expires > now)

    def verify(self, secret: str) -> Identity:
        """The identity a presented token stands for; TokenRefused when it opens nothing."""
        return self.verify_hash(token_digest(secret))

    def verify_hash(self, token_hash: str) -> Identity:
        """``verify`` by the token's hash (a session keeps the hash, never the token)."""
        found = self._by_hash.get(token_hash)
        if found is None:
            raise TokenRefused("unknown token")
        record = found.record
        if record.revoked is not None:
            raise TokenRefused(f"token {record.name!r} was revoked")
        if record.expires is not None and record.expires <= self._clock():
            raise TokenRefused(f"token {record.name!r} has expired")
        return found.identity

    def revoke(self, key: str, by: str = "") -> TokenRecord:
        """Revoke the token with this id or name; TokenError when none (or it already is)."""
        with self._lock:
            chosen = [x.record for x in self._values() if key in (x.record.id, x.record.name)]
            live = [r for r in chosen if r.revoked is None]
            if not live:
                why = "is revoked already" if chosen else "does not exist"
                raise TokenError(f"token {key!r} {why}")
            revoked = replace(live[0], revoked=self._clock())
            self._store.put_token(revoked)
            self._remember(revoked)
        self._tell(revoked)
        return revoked

    def _tell(self, record: TokenRecord) -> None:
        for hook in self.on_change:
            hook(record)

    def adopt(self, record: TokenRecord) -> bool:
        """Keep a token another collector of the fleet made or revoked (its hash, never its
        secret); a revocation is never undone. Returns whether anything changed."""
        with self._lock:
            known = self._by_hash.get(record.hash)
            if known is not None:
                if known.record.revoked is not None or record.revoked is None:
                    return False  # as known already, or revoked here: stays so
                record = replace(known.record, revoked=record.revoked)
            self._store.put_token(record)
            self._remember(record)
        return True

    def tokens(self) -> list[TokenRecord]:
        """Every token, oldest first (no secrets: only their hashes are kept)."""
        return sorted((x.record for x in self._values()), key=lambda r: (r.created, r.id))

    def has_admin(self) -> bool:
        """True while some active admin token exists (else the collector makes one)."""
        now = self._clock()
        return any(
            x.record.role == Role.ADMIN and self._active(x.record, now) for x in self._values()
        )
