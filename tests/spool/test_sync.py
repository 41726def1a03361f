"""sync: an offline spool (written without any collector) uploaded later into the real collector."""

from __future__ import annotations

import math
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from stepwatch.model import Run
from stepwatch.spool import NODE_SPOOL, REJECTED_DIR, Backoff, FakeCollector, Spool, sync, write_run
from stepwatch.wire import encode

STEPS_PER_BATCH = 4


def write_offline_run(root: Path, run_id: str, sources: int, batches: int, status: str) -> None:
    """A run directory as the SDK leaves it: run.json plus one spool per source."""
    write_run(root / run_id, Run(id=run_id, project="offline", status=status, start=1.7e9, end=2e9))
    for s in range(sources):
        with Spool(root / run_id / f"src-{s}") as spool:
            for seq in range(batches):
                steps = np.arange(seq * STEPS_PER_BATCH, (seq + 1) * STEPS_PER_BATCH)
                value = steps * 0.5 + s
                value[0] = math.inf if seq == 1 else value[0]
                spool.append(
                    encode(
                        f"src-{s}-{run_id}",
                        seq,
                        [("train.loss", {"run": run_id, "rank": str(s)})],
                        value,
                        1.7e9 + steps.astype(np.float64),
                        steps.astype(np.int64),
                        np.zeros(STEPS_PER_BATCH, np.uint32),
                    )
                )


def raw(url: str, run_id: str, rank: int) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=10) as client:
        params = {"name": "train.loss", "run": run_id, "label": f"rank:{rank}"}
        (series,) = client.get("/api/v1/series", params=params).json()
        return client.get("/api/v1/query/raw", params={"series": series["id"]}).json()  # type: ignore[no-any-return]


def test_offline_spool_round_trips_through_sync(server: Any, tmp_path: Path) -> None:
    write_offline_run(tmp_path, "r-off", sources=2, batches=3, status="finished")
    write_offline_run(tmp_path, "r-live", sources=1, batches=2, status="running")
    result = sync(tmp_path, server.url)
    assert (result.runs, result.batches, result.rejected, result.unsent) == (2, 8, 0, 0)
    assert result.samples == 8 * STEPS_PER_BATCH
    assert result.ok
    assert result.describe() == "sent 8 batches (32 samples) of 2 runs; nothing left to send"
    rank1 = raw(server.url, "r-off", 1)
    assert rank1["step"] == list(range(12))
    expected: list[Any] = [i * 0.5 + 1 for i in range(12)]
    expected[4] = "+Inf"
    assert rank1["value"] == expected
    with httpx.Client(base_url=server.url, timeout=10) as client:
        done = client.get("/api/v1/runs/r-off").json()
        live = client.get("/api/v1/runs/r-live").json()
    assert (done["status"], done["project"], done["end"]) == ("finished", "offline", 2e9)
    assert live["status"] == "running"


def test_shipping_a_spool_never_sets_an_ended_run_back_to_running(
    server: Any, tmp_path: Path
) -> None:
    write_offline_run(tmp_path, "r-ended", sources=1, batches=2, status="running")
    with httpx.Client(base_url=server.url, timeout=10) as client:
        client.post("/api/v1/runs", json={"id": "r-ended", "project": "offline"}).raise_for_status()
        ended = {"status": "failed", "end": 1.8e9}
        client.post("/api/v1/runs/r-ended/finish", json=ended).raise_for_status()
        assert sync(tmp_path, server.url).batches == 2  # its writer died: run.json says running
        run = client.get("/api/v1/runs/r-ended").json()
    assert (run["status"], run["end"]) == ("failed", 1.8e9)


def test_a_node_spool_outside_any_run_is_synced_without_a_run(server: Any, tmp_path: Path) -> None:
    with Spool(tmp_path / NODE_SPOOL / "agent-n0") as spool:
        key = ("host.cpu_pct", {"node": "n0"})
        ts = 1.7e9 + np.arange(3.0)
        spool.append(
            encode("agent-n0", 0, [key], ts * 0 + 12.5, ts, np.full(3, -1), np.zeros(3, np.uint32))
        )
    result = sync(tmp_path, server.url)
    assert (result.runs, result.batches, result.samples, result.unsent) == (1, 1, 3, 0)
    with httpx.Client(base_url=server.url, timeout=10) as client:
        (series,) = client.get("/api/v1/series", params={"name": "host.cpu_pct"}).json()
        assert series["labels"] == {"node": "n0"}
        assert client.get("/api/v1/runs").json() == []


def test_sync_with_a_refused_token_stops_at_once_and_keeps_everything(tmp_path: Path) -> None:
    write_offline_run(tmp_path, "r-auth", sources=2, batches=2, status="finished")
    with FakeCollector(token="s3cret") as collector:
        result = sync(tmp_path, collector.url, token="guess", timeout_s=60)
        assert (result.batches, result.rejected, result.unsent) == (0, 0, 4)
        assert (
            result.error is not None and "401" in result.error and "STEPWATCH_TOKEN" in result.error
        )
        assert not result.ok
        assert (
            result.describe()
            == f"sent 0 batches (0 samples) of 1 run; 4 batches left: {result.error}"
        )
        again = sync(tmp_path, collector.url, token="s3cret")
        assert (again.batches, again.unsent, again.error) == (4, 0, None)


def test_sync_twice_uploads_nothing_new(server: Any, tmp_path: Path) -> None:
    write_offline_run(tmp_path, "r-twice", sources=1, batches=2, status="finished")
    assert sync(tmp_path / "r-twice", server.url).batches == 2
    again = sync(tmp_path / "r-twice", server.url)
    assert (again.runs, again.batches, again.unsent) == (1, 0, 0)
    assert again.describe() == "sent 0 batches (0 samples) of 1 run; nothing left to send"
    assert raw(server.url, "r-twice", 0)["step"] == list(range(8))


def test_unreachable_collector_leaves_everything_unsent(tmp_path: Path) -> None:
    write_offline_run(tmp_path, "r-later", sources=2, batches=2, status="finished")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = sync(tmp_path, dead, timeout_s=0.2, backoff=Backoff(base_s=0.01, cap_s=0.05))
    assert (result.runs, result.batches, result.unsent) == (1, 0, 4)
    assert not result.ok
    said = re.fullmatch(
        r"sent 0 batches \(0 samples\) of 1 run; 4 batches left: server (\S+) unreachable "
        r"\(connection refused\) after (\d\.\d) s",
        result.describe(),
    )
    assert said is not None, result.describe()
    assert said.group(1) == dead and 0.0 < float(said.group(2)) <= 0.3


def test_a_collector_answering_try_later_or_rejecting_is_said_in_words(tmp_path: Path) -> None:
    write_offline_run(tmp_path, "r-busy", sources=1, batches=3, status="finished")
    quick = Backoff(base_s=0.01, cap_s=0.05)
    with FakeCollector() as collector:
        collector.faults.fail_next = 10_000
        busy = sync(tmp_path, collector.url, timeout_s=0.2, backoff=quick)
        assert (busy.batches, busy.unsent) == (0, 3)
        assert re.fullmatch(
            r"sent 0 batches \(0 samples\) of 1 run; 3 batches left: still failing after \d\.\d s: "
            rf"the collector at {collector.url} answered 503 \(try later\)",
            busy.describe(),
        ), busy.describe()
        collector.faults.fail_next, collector.faults.reject_seqs = 0, {1}
        picky = sync(tmp_path, collector.url, backoff=quick)
    assert (picky.batches, picky.rejected, picky.unsent, picky.ok) == (2, 1, 0, False)
    assert picky.describe() == (
        "sent 2 batches (8 samples) of 1 run; 1 batch rejected by the collector, kept in rejected/"
    )


def test_sync_keeps_a_batch_the_collector_calls_malformed_and_delivers_the_rest(
    server: Any, tmp_path: Path
) -> None:
    write_offline_run(tmp_path, "r-bad", sources=1, batches=3, status="finished")
    source = tmp_path / "r-bad" / "src-0"
    with Spool(source) as spool:
        spool.append(b"not a batch")  # the real collector answers 400 to it
    result = sync(tmp_path, server.url)
    assert (result.batches, result.rejected, result.unsent) == (3, 1, 0)
    assert len(raw(server.url, "r-bad", 0)["step"]) == 3 * STEPS_PER_BATCH
    with Spool(source / REJECTED_DIR) as rejected:
        assert [payload for _, payload in rejected.records()] == [b"not a batch"]
    again = sync(tmp_path, server.url)  # set aside, never sent again, never deleted
    assert (again.batches, again.rejected, again.unsent) == (0, 0, 0)
    assert (source / REJECTED_DIR).is_dir()


def test_sync_to_a_wrong_url_keeps_everything_and_says_so(server: Any, tmp_path: Path) -> None:
    write_offline_run(tmp_path, "r-lost", sources=1, batches=2, status="finished")
    quick = Backoff(base_s=0.01, cap_s=0.05)
    wrong = sync(tmp_path, f"{server.url}/stepwatch", timeout_s=0.3, backoff=quick)
    assert (wrong.batches, wrong.rejected, wrong.unsent) == (0, 0, 2)
    assert "answered 404 (no such route: is the collector URL right?)" in wrong.describe()
    right = sync(tmp_path, server.url)
    assert (right.batches, right.rejected, right.unsent) == (2, 0, 0)
