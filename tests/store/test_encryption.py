"""An encrypted store: nothing readable in its file or WAL; only its own key opens it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stepwatch._encryption import EncryptionError, EncryptionKey, create_key_file, read_key_file
from stepwatch.model import Event, Run, SeriesKey
from stepwatch.store import Store, StoreError

from .conftest import T0, batch

LABEL = "label-value-7f3a9c"
LINE = "log-line-e41b07 CUDA out of memory"
NAME = "train.metric_5d2e"


def _write(store: Store) -> None:
    keys = [SeriesKey.of(NAME, {"run": "r1", "team": LABEL})]
    event = Event(T0, "log", LINE, labels={"run": "r1"})
    store.apply([batch(keys, [0, 0], [T0, T0 + 1], [1.5, 2.5], events=[event])])
    store.upsert_run(Run("r1", project=LABEL, start=T0))


def _raw(path: Path) -> bytes:
    """The file's bytes and its WAL's, as a thief with a copy of the disk would have them."""
    wal = path.with_name(path.name + ".wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def _assert_hidden(raw: bytes) -> None:
    for secret in (LABEL, LINE, NAME):
        assert secret.encode() not in raw


@pytest.fixture
def key(tmp_path: Path) -> EncryptionKey:
    return read_key_file(create_key_file(tmp_path / "store.key"))


@pytest.fixture
def other_key(tmp_path: Path) -> EncryptionKey:
    return read_key_file(create_key_file(tmp_path / "other.key"))


def test_encrypted_store_hides_labels_names_and_logs_and_reads_back(
    store_path: Path, key: EncryptionKey
) -> None:
    with Store(store_path, key=key) as store:
        _write(store)
        assert store_path.with_name(store_path.name + ".wal").exists()
        _assert_hidden(_raw(store_path))  # the WAL holds the batch before a checkpoint
    _assert_hidden(_raw(store_path))
    with Store(store_path, key=key) as store:
        (info,) = store.series(NAME)
        assert info.key.label("team") == LABEL
        assert list(store.raw(info.id)["value"]) == [1.5, 2.5]
        assert [e.text for e in store.logs()] == [LINE]
        run = store.get_run("r1")
        assert run is not None and run.project == LABEL


def test_the_plain_store_holds_them_in_the_clear(store_path: Path) -> None:
    """The search above can fail: the same data unencrypted is found in the raw bytes."""
    with Store(store_path) as store:
        _write(store)
    assert LABEL.encode() in _raw(store_path)
    with Store(store_path) as store:
        assert [e.text for e in store.logs()] == [LINE]


def test_wrong_key_no_key_and_key_for_a_plain_file_are_clear_errors(
    tmp_path: Path, store_path: Path, key: EncryptionKey, other_key: EncryptionKey
) -> None:
    with Store(store_path, key=key) as store:
        _write(store)
    before = _raw(store_path)
    with pytest.raises(StoreError, match=r"encrypted with another key than the key file .*other"):
        Store(store_path, key=other_key)
    with pytest.raises(StoreError, match=r"is encrypted: give its key \(--encryption-key-file"):
        Store(store_path)
    assert _raw(store_path) == before  # nothing was changed, and no empty store was made
    plain = tmp_path / "plain.duckdb"
    Store(plain).close()
    with pytest.raises(StoreError, match=r"plain.duckdb is not encrypted"):
        Store(plain, key=key)
    with Store(store_path, key=key) as store:  # the right key still opens it afterwards
        assert [e.text for e in store.logs()] == [LINE]


def test_errors_never_show_the_key(
    store_path: Path, key: EncryptionKey, other_key: EncryptionKey
) -> None:
    Store(store_path, key=key).close()
    with pytest.raises(StoreError) as caught:
        Store(store_path, key=other_key)
    for secret in (key, other_key):
        assert secret.secret.hex() not in str(caught.value)
        assert secret.derive("store").hex() not in str(caught.value)
        assert secret.secret.hex() not in repr(secret)


def test_without_the_encryption_extra_a_key_says_how_to_get_it(
    store_path: Path, key: EncryptionKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb_extension_httpfs", None)  # as if not installed
    with pytest.raises(EncryptionError, match=r"pip install 'stepwatch\[encryption\]'"):
        Store(store_path, key=key)
    assert not store_path.exists()
    with Store(store_path) as store:  # a plain store needs none of it
        _write(store)
