"""Encryption from the command line: `key create`, a collector on an encrypted store fed by the
SDK, an agent's sealed spool sent by `sync`, `run` with a key, a wrong key as one `Error:` line."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from stepwatch._encryption import ENV_KEY_FILE, read_key_file
from stepwatch.cli import main
from stepwatch.sdk import Run
from stepwatch.store import Store

from .test_mistakes import _fails_as_a_process

LABEL = "team-label-0c6b1d"
NAME = "train.metric_f29a"


def _key(path: Path) -> Path:
    result = CliRunner().invoke(main, ["key", "create", str(path)])
    assert result.exit_code == 0, result.output
    return path


def _stepwatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    return subprocess.run(
        [sys.executable, "-m", "stepwatch.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_key_create_writes_an_owner_only_key_and_never_overwrites(tmp_path: Path) -> None:
    path = _key(tmp_path / "k")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_text().strip()) == 64
    before = path.read_bytes()
    line = _fails_as_a_process("key", "create", str(path), cwd=tmp_path)
    assert line == f"Error: {path} exists: a key is never overwritten"
    assert path.read_bytes() == before


def test_collector_on_an_encrypted_store_and_the_wrong_key(
    collector_factory: Any, tmp_path: Path
) -> None:
    key, wrong = _key(tmp_path / "store.key"), _key(tmp_path / "wrong.key")
    collector = collector_factory(extra_args=("--encryption-key-file", str(key)))
    run = Run(
        server=collector.url,
        dir=tmp_path / "spool",
        run_id="r-enc",
        labels={"team": LABEL},
        heartbeat_s=None,
        environ={ENV_KEY_FILE: str(key)},
    )
    run.log({NAME: 1.0}, step=0)
    run.finish()
    collector.stop()
    store = collector.store_path
    assert LABEL.encode() not in store.read_bytes()
    before = store.read_bytes()
    line = _fails_as_a_process(
        "server", "--store", str(store), "--port", "0", "--encryption-key-file", str(wrong),
        cwd=tmp_path,
    )  # fmt: skip
    assert line == f"Error: store {store} is encrypted with another key than the key file {wrong}"
    line = _fails_as_a_process("export", "parquet", "r-enc", "--store", str(store), cwd=tmp_path)
    assert line.startswith(f"Error: store {store} is encrypted: give its key")
    assert store.read_bytes() == before
    done = _stepwatch(
        "export", "parquet", "r-enc", "--store", str(store), "--encryption-key-file", str(key),
        "--out", str(tmp_path / "r.parquet"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert LABEL.encode() in (tmp_path / "r.parquet").read_bytes()  # the export is plain


def test_an_agents_sealed_spool_is_sent_by_sync_with_the_key(server: Any, tmp_path: Path) -> None:
    key = _key(tmp_path / "node.key")
    spool = tmp_path / "spool"
    done = _stepwatch(
        "agent", "--gpu", "none", "--node", LABEL, "--dir", str(spool), "--duration", "2",
        "--encryption-key-file", str(key), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    raw = b"".join(p.read_bytes() for p in spool.rglob("*.seg"))
    assert raw and LABEL.encode() not in raw
    line = _fails_as_a_process("sync", str(spool), "--server", server.url, cwd=tmp_path)
    assert "is encrypted: set STEPWATCH_ENCRYPTION_KEY_FILE" in line
    done = _stepwatch(
        "sync", str(spool), "--server", server.url, "--encryption-key-file", str(key), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    with httpx.Client(base_url=server.url, timeout=10) as client:
        series = client.get("/api/v1/series", params={"label": f"node:{LABEL}"}).json()
    assert series and {s["labels"]["node"] for s in series} == {LABEL}


def test_run_encrypts_its_store_and_hands_its_key_to_the_command(tmp_path: Path) -> None:
    key, store, spool = _key(tmp_path / "run.key"), tmp_path / "run.duckdb", tmp_path / "spool"
    # While it runs, the command's spool is on disk, sealed (once delivered, it is deleted).
    script = (
        f"import pathlib, stepwatch; run = stepwatch.init(labels={{'team': {LABEL!r}}}); "
        f"run.log({{{NAME!r}: 1.0}}, step=0); "
        f"raw = b''.join(p.read_bytes() for p in pathlib.Path({str(spool)!r}).rglob('*') "
        "if p.is_file()); "
        f"assert raw and {LABEL.encode()!r} not in raw, 'the spool is not sealed'; run.finish()"
    )
    done = _stepwatch(
        "run", "--gpu", "none", "--store", str(store), "--dir", str(spool),
        "--encryption-key-file", str(key), "--", sys.executable, "-c", script, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert LABEL.encode() not in store.read_bytes()
    raw = b"".join(p.read_bytes() for p in spool.rglob("*") if p.is_file())
    assert LABEL.encode() not in raw  # what the agent's spool still holds is sealed too
    with Store(store, key=read_key_file(key)) as opened:
        (info,) = opened.series(NAME)
        assert info.key.label("team") == LABEL
