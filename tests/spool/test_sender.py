"""The sender thread against a collector that fails, loses replies, rejects, or is not there."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from stepwatch.model import Run
from stepwatch.spool import REJECTED_DIR, Backoff, FakeCollector, HttpClient, Sender, Spool
from stepwatch.wire import encode

FAST = Backoff(base_s=0.005, cap_s=0.05)
RUN = Run(id="r1", project="p", name="test")


def batch(seq: int, source: str = "src-a") -> bytes:
    value = np.array([float(seq), float("nan")])
    return encode(
        source,
        seq,
        [("train.loss", {"run": "r1"}), ("train.lr", {"run": "r1"})],
        value,
        np.full(2, 1.7e9 + seq),
        np.full(2, seq, np.int64),
        np.array([0, 1], np.uint32),
    )


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    with FakeCollector() as fake:
        yield fake


def sender_for(spool: Spool, url: str, token: str | None = None) -> Sender:
    backoff = Backoff(base_s=FAST.base_s, cap_s=FAST.cap_s)
    return Sender(spool, HttpClient(url, token, timeout_s=2.0), lambda: RUN, backoff=backoff)


def ship(spool: Spool, url: str, batches: int) -> Sender:
    """Spool ``batches`` batches, then run a sender until it has shipped them all."""
    for seq in range(batches):
        spool.append(batch(seq))
    sender = sender_for(spool, url)
    sender.start()
    assert sender.close(timeout_s=10)
    return sender


def seqs(collector: FakeCollector) -> list[int]:
    return [b.seq for b in collector.batches]


def test_ships_in_order_over_one_connection_after_creating_the_run(
    tmp_path: Path, collector: FakeCollector
) -> None:
    with Spool(tmp_path) as spool:
        sender = sender_for(spool, collector.url)
        sender.start()
        for seq in range(5):
            spool.append(batch(seq))
            sender.notify()
        finished = Run(id="r1", status="finished", end=123.0)
        assert sender.close(timeout_s=10, finish=finished)
        assert not spool.pending()
    assert seqs(collector) == [0, 1, 2, 3, 4]
    assert collector.paths[0] == "/api/v1/runs" and collector.paths[-1] == "/api/v1/runs/r1/finish"
    assert collector.runs["r1"]["name"] == "test"
    assert collector.finishes["r1"] == {"status": "finished", "end": 123.0}
    assert collector.connections == 1
    assert sender.stats.batches == 5 and sender.stats.samples == 10


def test_retries_a_failing_collector_until_it_recovers(
    tmp_path: Path, collector: FakeCollector
) -> None:
    collector.faults.fail_next = 4
    with Spool(tmp_path) as spool:
        ship(spool, collector.url, batches=3)
    assert seqs(collector) == [0, 1, 2]
    assert collector.faults.fail_next == 0


def test_a_reply_lost_after_commit_does_not_duplicate_the_batch(
    tmp_path: Path, collector: FakeCollector
) -> None:
    collector.faults.lose_replies = 2
    with Spool(tmp_path) as spool:
        ship(spool, collector.url, batches=3)
    assert seqs(collector) == [0, 1, 2]
    assert collector.duplicates == 2


def test_a_malformed_batch_is_kept_in_rejected_counted_and_stepped_over(
    tmp_path: Path, collector: FakeCollector, caplog: pytest.LogCaptureFixture
) -> None:
    collector.faults.reject_seqs = {1}
    with Spool(tmp_path / "src-a") as spool:
        sender = ship(spool, collector.url, batches=3)
        assert not spool.pending()
    assert seqs(collector) == [0, 2]
    assert sender.stats.rejected == 1
    with Spool(tmp_path / "src-a" / REJECTED_DIR) as rejected:
        assert [payload for _, payload in rejected.records()] == [batch(1)]
    assert "rejected by the collector (400: batch 1 rejected" in caplog.text
    assert f"kept in {tmp_path / 'src-a' / REJECTED_DIR} (1 rejected so far)" in caplog.text


def test_every_answer_but_a_malformed_batch_keeps_the_data_until_it_is_delivered_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeCollector(token="s3cret") as collector, Spool(tmp_path) as spool:
        collector.faults.proxy_pages = [502, 504, 413, 400]  # a proxy's pages are not about us
        collector.faults.statuses = [404, 404, 405, 500, 503, 429, 401, 403]
        for seq in range(3):
            spool.append(batch(seq))
        with caplog.at_level(logging.WARNING, logger="stepwatch.spool"):
            sender = sender_for(spool, collector.url, token="s3cret")
            sender.start()
            assert sender.close(timeout_s=10)
        assert not (collector.faults.statuses or collector.faults.proxy_pages)
        assert seqs(collector) == [0, 1, 2] and collector.duplicates == 0
        assert sender.stats.rejected == 0 and not (tmp_path / REJECTED_DIR).exists()
    said = [r.getMessage() for r in caplog.records]
    assert all("stay in the spool and are retried" in line for line in said)
    for status in (502, 504, 413, 400, 404, 405, 500, 503, 429, 401, 403):
        assert sum(f" {status}" in line for line in said) >= 1, status
    assert len(said) == 11  # one line per cause: the 404 twice in a row is said once
    assert "no such route: is the collector URL right?" in said[4]
    assert "not the collector's (a proxy?)" in said[0]
    assert "s3cret" not in caplog.text


def test_an_absent_collector_leaves_the_batches_for_the_next_sender(
    tmp_path: Path, collector: FakeCollector
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with Spool(tmp_path) as spool:
        spool.append(batch(0))
        sender = sender_for(spool, dead)
        sender.start()
        assert not sender.close(timeout_s=0.3)
        assert spool.pending()
    with Spool(tmp_path) as spool:  # a restart resumes from the acked position
        spool.append(batch(1))
        sender = sender_for(spool, collector.url)
        sender.start()
        assert sender.close(timeout_s=10)
    assert seqs(collector) == [0, 1]


def test_bearer_token_is_sent(tmp_path: Path) -> None:
    with FakeCollector(token="s3cret") as collector, Spool(tmp_path) as spool:
        spool.append(batch(0))
        sender = sender_for(spool, collector.url, token="s3cret")
        sender.start()
        assert sender.close(timeout_s=10)
        assert seqs(collector) == [0]


def test_a_refused_token_keeps_every_batch_for_a_sender_with_the_right_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeCollector(token="s3cret") as collector, Spool(tmp_path) as spool:
        for seq in range(3):
            spool.append(batch(seq))
        wrong = sender_for(spool, collector.url, token="guess")
        wrong.start()
        assert not wrong.close(timeout_s=0.5)
        assert wrong.stats.rejected == 0 and spool.pending() and seqs(collector) == []
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert len(errors) == 1 and "refused our token (401" in errors[0]
        right = sender_for(spool, collector.url, token="s3cret")
        right.start()
        assert right.close(timeout_s=10)
        assert seqs(collector) == [0, 1, 2]


def test_backoff_doubles_up_to_its_cap_with_jitter() -> None:
    top = Backoff(base_s=0.1, cap_s=1.0, rng=lambda: 1.0)
    assert [round(top.next(), 3) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    bottom = Backoff(base_s=0.1, cap_s=1.0, rng=lambda: 0.0)
    assert [round(bottom.next(), 3) for _ in range(2)] == [0.05, 0.1]
    top.reset()
    assert top.next() == pytest.approx(0.1)
