"""Tokens: made with a role and projects, kept only as hashes, refused once revoked or expired,
and the same after the store is reopened."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stepwatch.auth import (
    ALL_PROJECTS,
    TOKEN_PREFIX,
    Permission,
    Role,
    TokenBook,
    TokenError,
    TokenRefused,
    ensure_admin_token,
)
from stepwatch.store import Store


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store(tmp_path / "s.duckdb") as opened:
        yield opened


def test_a_token_stands_for_its_identity_and_only_its_hash_is_stored(store: Store) -> None:
    record, secret = TokenBook(store).create(Role.OPERATOR, ["vision", "nlp"], name="ops")
    assert secret.startswith(TOKEN_PREFIX) and len(secret) > 40
    who = TokenBook(store).verify(secret)  # a fresh book: read back from the store
    assert (who.name, who.role, who.projects) == ("ops", Role.OPERATOR, {"vision", "nlp"})
    assert who.can(Permission.OPERATE) and not who.can(Permission.ADMIN)
    assert who.sees("vision") and not who.sees("speech") and not who.sees(None)
    assert all(secret not in str(t) for t in store.tokens())
    assert store.tokens()[0].hash == record.hash


def test_an_all_project_token_sees_data_of_no_project(store: Store) -> None:
    _, secret = TokenBook(store).create(Role.VIEWER, [ALL_PROJECTS])
    who = TokenBook(store).verify(secret)
    assert who.projects is None and who.sees(None) and who.sees("anything")


def test_revoked_and_expired_tokens_open_nothing(store: Store) -> None:
    clock = Clock()
    book = TokenBook(store, clock)
    _, revoked = book.create(Role.VIEWER, ["p"], name="gone")
    _, expiring = book.create(Role.VIEWER, ["p"], name="brief", expires_in_s=60)
    book.revoke("gone")
    with pytest.raises(TokenRefused, match="'gone' was revoked"):
        TokenBook(store, clock).verify(revoked)
    assert book.verify(expiring).name == "brief"
    clock.now += 61
    with pytest.raises(TokenRefused, match="'brief' has expired"):
        book.verify(expiring)
    with pytest.raises(TokenRefused, match="unknown token"):
        book.verify(TOKEN_PREFIX + "guess")


@pytest.mark.parametrize(
    ("role", "projects", "name", "message"),
    [
        ("root", ["p"], None, "unknown role 'root'"),
        ("viewer", [], None, "at least one project"),
        ("viewer", ["a b"], None, "invalid project name 'a b'"),
        ("viewer", ["p"], "no spaces", "invalid token name"),
    ],
)
def test_a_token_that_cannot_be_made_says_why_and_stores_nothing(
    store: Store, role: str, projects: list[str], name: str | None, message: str
) -> None:
    with pytest.raises(TokenError, match=message):
        TokenBook(store).create(role, projects, name=name)
    assert store.tokens() == []


def test_names_are_unique_among_active_tokens_and_revoking_twice_is_refused(store: Store) -> None:
    book = TokenBook(store)
    book.create(Role.INGEST, ["p"], name="node7")
    with pytest.raises(TokenError, match="exists already"):
        book.create(Role.INGEST, ["p"], name="node7")
    book.revoke("node7")
    book.create(Role.INGEST, ["p"], name="node7")  # the name is free again
    with pytest.raises(TokenError, match="does not exist"):
        book.revoke("node8")


def test_the_first_admin_token_is_made_once(store: Store, tmp_path: Path) -> None:
    book = TokenBook(store)
    path = tmp_path / "admin-token"
    assert ensure_admin_token(book, path) == path
    who = book.verify(path.read_text().strip())
    assert who.role == Role.ADMIN and who.projects is None
    assert ensure_admin_token(book, path) is None


def test_a_token_another_collector_made_is_adopted_and_a_revocation_never_undone(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "a.duckdb") as a_store, Store(tmp_path / "b.duckdb") as b_store:
        here, there = TokenBook(a_store), TokenBook(b_store)
        told: list[Any] = []
        here.on_change.append(told.append)
        record, secret = here.create("viewer", ["p"], name="roaming")
        assert told == [record]
        assert there.adopt(record) and not there.adopt(record)
        assert there.verify(secret).name == "roaming"
        revoked = here.revoke("roaming")
        assert told[-1] == revoked and there.adopt(revoked)
        assert not there.adopt(record)  # the older word comes again: still revoked
        with pytest.raises(TokenRefused, match="revoked"):
            there.verify(secret)
        assert not there.adopt(replace(revoked, revoked=None))
        assert TokenBook(b_store).tokens()[0].revoked is not None  # kept in the store
