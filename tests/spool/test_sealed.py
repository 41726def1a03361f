"""Sealed spools: a real SDK run with a key leaves nothing readable; only its key sends it."""

from __future__ import annotations

import logging
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch._encryption import (
    ENV_KEY_FILE,
    EncryptionError,
    EncryptionKey,
    create_key_file,
    read_key_file,
)
from stepwatch.sdk import Run
from stepwatch.spool import RUN_FILE, Sealer, Spool, SpoolKeyError, read_run, sync

LABEL = "team-label-c81f2e"
LINE = "log-line-4b9d0a NCCL timeout on rank 3"
NAME = "train.metric_a7e3"
PROJECT = "project-95d1c4"

#: A training script, as a user would write it: the key comes from the environment only.
SCRIPT = f"""
import sys, stepwatch
run = stepwatch.init(project={PROJECT!r}, dir=sys.argv[1], run_id="r-sealed",
                     labels={{"team": {LABEL!r}}}, heartbeat_s=None)
for step in range(5):
    run.log({{{NAME!r}: step * 0.5}}, step=step)
run.event("log", {LINE!r})
run.finish()
"""


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    return create_key_file(tmp_path / "spool.key")


def _sdk_run(root: Path, env_key: Path | None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    if env_key is not None:
        env[ENV_KEY_FILE] = str(env_key)
    subprocess.run([sys.executable, "-c", SCRIPT, str(root)], env=env, check=True, timeout=60)


def _raw(root: Path) -> bytes:
    """Every byte under the spool root, as a copy of it would hold them."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _secrets_in(raw: bytes) -> list[str]:
    return [s for s in (LABEL, LINE, NAME, PROJECT) if s.encode() in raw]


def _series(url: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=10) as client:
        return client.get("/api/v1/series", params={"name": NAME}).json()  # type: ignore[no-any-return]


def test_a_sealed_sdk_spool_hides_everything_and_syncs_only_with_its_key(
    server: Any, tmp_path: Path, key_file: Path
) -> None:
    root = tmp_path / "spool"
    _sdk_run(root, key_file)
    assert _secrets_in(_raw(root)) == []
    with pytest.raises(SpoolKeyError, match=r"r-sealed is encrypted: set STEPWATCH_ENCRYPTION"):
        sync(root, server.url, timeout_s=5)
    other = Sealer(read_key_file(create_key_file(tmp_path / "other.key")))
    with pytest.raises(SpoolKeyError, match=r"sealed with another key than the key file .*other"):
        sync(root, server.url, timeout_s=5, sealer=other)
    assert _series(server.url) == []  # nothing was sent by the refused attempts
    result = sync(root, server.url, timeout_s=30, sealer=Sealer(read_key_file(key_file)))
    assert result.ok and result.samples >= 5
    (series,) = _series(server.url)
    assert series["labels"]["team"] == LABEL
    with httpx.Client(base_url=server.url, timeout=10) as client:
        run = client.get("/api/v1/runs/r-sealed").json()
        events = client.get("/api/v1/events", params={"run": "r-sealed"}).json()
    assert run["project"] == PROJECT
    assert LINE in [e["text"] for e in events]


def test_a_plain_spool_still_reads_without_a_key_and_shows_its_data(tmp_path: Path) -> None:
    """The search above can fail: without a key the same run is in the clear."""
    root = tmp_path / "spool"
    _sdk_run(root, None)
    assert _secrets_in(_raw(root)) == [LABEL, LINE, NAME, PROJECT]
    assert read_run(root / "r-sealed").project == PROJECT
    (source,) = [d for d in (root / "r-sealed").iterdir() if d.is_dir()]
    with Spool(source) as spool:
        assert len(list(spool.records())) >= 1


def test_the_sdk_ships_live_through_a_sealed_spool(
    server: Any, tmp_path: Path, key_file: Path
) -> None:
    run = Run(
        project=PROJECT,
        server=server.url,
        dir=tmp_path / "spool",
        labels={"team": LABEL},
        heartbeat_s=None,
        environ={ENV_KEY_FILE: str(key_file)},
    )
    for step in range(3):
        run.log({NAME: float(step)}, step=step)
    run.flush()  # on disk, as long as it waits to be delivered: sealed
    assert _secrets_in(_raw(tmp_path / "spool")) == []
    sealed = (tmp_path / "spool" / run.id / RUN_FILE).read_bytes()
    with pytest.raises(SpoolKeyError):
        read_run(tmp_path / "spool" / run.id)
    assert read_run(tmp_path / "spool" / run.id, Sealer(read_key_file(key_file))).project == PROJECT
    assert sealed.startswith(b"SWE1")
    run.finish()
    (series,) = _series(server.url)
    assert series["labels"]["team"] == LABEL
    assert not (tmp_path / "spool" / run.id).exists()  # delivered: deleted


def _reframe(payload: bytes) -> bytes:
    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


def test_an_altered_sealed_record_is_skipped_like_a_torn_one(
    tmp_path: Path, key_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key: EncryptionKey = read_key_file(key_file)
    with Spool(tmp_path / "s", sealer=Sealer(key)) as spool:
        assert spool.append(b"first") and spool.append(b"second")
        assert [payload for _, payload in spool.records()] == [b"first", b"second"]
    segment = next((tmp_path / "s").glob("*.seg"))
    data = segment.read_bytes()
    size = struct.unpack_from("<I", data, 0)[0]
    head, tail = data[: 8 + size], data[8 + size :]
    sealed_second = bytearray(tail[8:])
    sealed_second[-1] ^= 1  # one bit of the tag, with a checksum that still matches
    segment.write_bytes(head + _reframe(bytes(sealed_second)))
    with caplog.at_level(logging.ERROR, "stepwatch.spool"):
        with Spool(tmp_path / "s", sealer=Sealer(key)) as spool:
            assert [payload for _, payload in spool.records()] == [b"first"]
    assert "(or altered since): the rest of segment 1 is skipped" in caplog.text


def test_without_the_encryption_extra_a_key_says_how_to_get_it(
    tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(EncryptionError, match=r"pip install 'stepwatch\[encryption\]'"):
        Run(dir=tmp_path / "spool", heartbeat_s=None, environ={ENV_KEY_FILE: str(key_file)})
    assert not (tmp_path / "spool").exists()
