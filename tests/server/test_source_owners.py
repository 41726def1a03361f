"""A source id belongs to the identity that first sent it: the ingest route's check over a real
store, kept across a reopen (the identity is the string the auth layer leaves on the request)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stepwatch.server._body import check_owner
from stepwatch.server._errors import ApiError
from stepwatch.store import Store


def test_a_source_is_bound_to_its_first_sender_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    with Store(path) as store:
        asyncio.run(check_owner(store, "sdk-1", "alice"))
        asyncio.run(check_owner(store, "sdk-1", "alice"))
        asyncio.run(check_owner(store, "sdk-2", "bob"))
        assert (store.owner_of("sdk-1"), store.owner_of("sdk-2")) == ("alice", "bob")
    with Store(path) as store:
        with pytest.raises(ApiError) as refused:
            asyncio.run(check_owner(store, "sdk-1", "bob"))
        assert refused.value.status == 403
        assert str(refused.value) == "source 'sdk-1' belongs to another identity"
        assert store.claim_source("sdk-1", "mallory") == "alice"
