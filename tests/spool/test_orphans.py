"""Orphaned spools come home: a kill -9'd trainer's unsent tail is shipped by the next stepwatch
process on the node, exactly once; a live writer's spool, or one sealed with a key the new
process lacks, is left alone."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from conftest import Eventually, free_port

from stepwatch._encryption import create_key_file, read_key_file
from stepwatch.model import Run
from stepwatch.spool import (
    HttpClient,
    OrphanShipper,
    Sealer,
    Spool,
    has_unsent,
    sync,
    write_run,
)
from stepwatch.wire import encode

#: A trainer as a user writes one. ``hang``: after flushing it waits to be killed; ``until FILE``:
#: it keeps training until FILE exists, then finishes; else it finishes at once.
TRAINER = textwrap.dedent(
    """
    import os, sys, time
    import stepwatch
    root, server, run_id, steps, mode = sys.argv[1:6]
    run = stepwatch.init(run_id=run_id, dir=root, server=server, heartbeat_s=None,
                         flush_interval_s=0.05)
    for step in range(int(steps)):
        run.log({"loss": float(step)}, step=step)
    run.flush()
    print("flushed", run.max_spool_bytes, flush=True)
    if mode == "hang":
        time.sleep(3600)
    step = int(steps)
    while mode == "until" and not os.path.exists(sys.argv[6]):
        run.log({"loss": float(step)}, step=step)
        step += 1
        time.sleep(0.05)
    run.finish(timeout_s=1)
    print("dropped", run.dropped_samples, flush=True)
    """
)


def _trainer(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A trainer subprocess; its first line ("flushed CAP") says its data is in its spool."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", TRAINER, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**environ, **(env or {})},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("flushed"), _stderr(proc)
    return proc


def _stderr(proc: subprocess.Popen[str]) -> str:
    proc.kill()
    return proc.communicate()[1]


def _kill_9(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.communicate()


def _dead_url() -> str:
    """A collector URL where nothing listens: the collector is down while the trainer runs."""
    return f"http://127.0.0.1:{free_port()}"


def _steps(url: str, run_id: str) -> list[int]:
    """The steps of ``run_id``'s train.loss held by the collector, in order, duplicates kept."""
    with httpx.Client(base_url=url, timeout=10) as client:
        found = client.get("/api/v1/series", params={"name": "train.loss", "run": run_id}).json()
        if not found:
            return []
        (series,) = found
        raw = client.get("/api/v1/query/raw", params={"series": series["id"]}).json()
        return raw["step"]  # type: ignore[no-any-return]


def _spool_dir(root: Path, run_id: str) -> Path:
    (source,) = [d for d in (root / run_id).iterdir() if d.is_dir()]
    return source


def _finish(proc: subprocess.Popen[str], stop_file: Path) -> str:
    stop_file.touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out


def test_a_killed_trainers_tail_is_shipped_by_the_next_runs_exactly_once(
    server: Any, tmp_path: Path, eventually: Eventually
) -> None:
    root, stop = tmp_path / "spool", tmp_path / "stop"
    killed = _trainer(root, _dead_url(), "r-killed", 500, "hang")
    _kill_9(killed)
    assert has_unsent(_spool_dir(root, "r-killed"))
    assert _steps(server.url, "r-killed") == []
    # two new runs on the node at once: both look for orphans, the lock lets one ship each
    nexts = [_trainer(root, server.url, f"r-next{i}", 10, "until", stop) for i in range(2)]
    try:
        assert eventually(lambda: len(_steps(server.url, "r-killed")) >= 500)
    finally:
        for proc in nexts:
            _finish(proc, stop)
    assert _steps(server.url, "r-killed") == list(range(500))  # all of it, each step once
    assert not (root / "r-killed").exists()  # shipped: deleted
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/api/v1/runs/r-killed").json()["status"] == "running"


def test_a_spool_its_live_writer_holds_is_left_alone_until_the_writer_is_gone(
    server: Any, tmp_path: Path
) -> None:
    root = tmp_path / "spool"
    live = _trainer(root, _dead_url(), "r-live", 50, "hang")
    try:
        shipper = OrphanShipper(root, HttpClient(server.url))
        shipper.ship_once()
        assert sync(root, server.url, timeout_s=5).busy == 1  # nor does sync ship it
        assert _steps(server.url, "r-live") == []
        assert has_unsent(_spool_dir(root, "r-live"))
    finally:
        _kill_9(live)
    assert (root / "r-live").is_dir()  # kept while its writer lived
    shipper.ship_once()
    shipper.close()
    assert _steps(server.url, "r-live") == list(range(50))
    assert shipper.stats.batches >= 1
    assert not (root / "r-live").exists()


def test_the_default_cap_drops_counts_and_reports_in_the_run(
    server: Any, tmp_path: Path, eventually: Eventually
) -> None:
    root = tmp_path / "spool"
    capped = _trainer(
        root, _dead_url(), "r-capped", 5000, "finish", env={"STEPWATCH_MAX_SPOOL_BYTES": "16KiB"}
    )
    out, err = capped.communicate(timeout=120)
    dropped = int(out.split()[-1])
    assert dropped > 0
    (line,) = [x for x in err.splitlines() if "stepwatch: run r-capped finished" in x]
    assert f"{dropped:,} dropped" in line and "next stepwatch process" in line
    assert sum("is full" in x for x in err.splitlines()) == 1  # said once, when dropping began
    with OrphanShipper(root, HttpClient(server.url)) as shipper:
        shipper.ship_once()
    kept = _steps(server.url, "r-capped")
    assert len(kept) + dropped == 5000
    with httpx.Client(base_url=server.url, timeout=10) as client:
        (summary,) = client.get("/api/v1/runs/summary", params={"run": "r-capped"}).json()
    assert summary["dropped_samples"] == dropped


def _sealed_orphan(root: Path, sealer: Sealer) -> None:
    run_dir = root / "r-sealed"
    write_run(run_dir, Run(id="r-sealed"), sealer)
    with Spool(run_dir / "src-0", sealer=sealer) as spool:
        key = ("train.loss", {"run": "r-sealed"})
        one = np.ones(1)
        spool.append(
            encode(
                "src-0",
                0,
                [key],
                one,
                one * 1.7e9,
                one.astype(np.int64) * 0,
                np.zeros(1, np.uint32),
            )
        )


def test_a_sealed_orphan_is_skipped_and_said_once_without_its_key(
    server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "spool"
    key = read_key_file(create_key_file(tmp_path / "spool.key"))
    _sealed_orphan(root, Sealer(key))
    with caplog.at_level(logging.WARNING, logger="stepwatch"):
        with OrphanShipper(root, HttpClient(server.url)) as keyless:
            keyless.ship_once()
            keyless.ship_once()
    said = [r.getMessage() for r in caplog.records if "r-sealed" in r.getMessage()]
    assert len(said) == 1 and "encrypted" in said[0] and "stepwatch sync" in said[0]
    assert _steps(server.url, "r-sealed") == []
    with OrphanShipper(root, HttpClient(server.url), Sealer(key)) as keyed:
        keyed.ship_once()
    assert _steps(server.url, "r-sealed") == [0]
