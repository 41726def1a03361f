"""GET /metrics of a real collector, parsed with prometheus_client's own parser: what it
ingested and refused, by cause; its queues, commit latency and detection lag; the alerts
firing; notifications and playbook runs by outcome; the store's size and the samples producers
dropped from full spools; the process. With auth it needs a token that may read, unless
--metrics-public, and it never names a run or project."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from act._notify_parts import Recorder, recording_server
from conftest import poll
from prometheus_client.parser import text_string_to_metric_families

from stepwatch.model import DROPPED_SAMPLES
from stepwatch.server import CollectorOptions, ServerThread
from stepwatch.server._metrics import StoreFigures
from stepwatch.store import Store
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

from .conftest import make_batch

T0 = 1_780_000_000.0
MAX_BODY = 64 * 1024
PLAYBOOKS = """\
playbooks:
  - name: works
    kind: command
    argv: [{python}, -c, "pass"]
    dry_run: false
    destructive: false
  - name: breaks
    kind: command
    argv: [{python}, -c, "raise SystemExit(3)"]
    dry_run: false
    destructive: false
"""
NOTIFY = """\
receivers:
  - name: good
    type: webhook
    url: {good}/alerts
  - name: gone
    type: webhook
    url: http://127.0.0.1:{closed}/alerts
    retries: 0
route:
  receiver: good
  group_wait: 0s
  routes:
    - receiver: good
      matchers: ["kind = nonfinite"]
      group_wait: 0s
      continue: true
    - receiver: gone
      matchers: ["kind = nonfinite"]
      group_wait: 0s
"""

Figures = dict[str, dict[tuple[tuple[str, str], ...], float]]

#: A collector on a free port.
ANYWHERE = CollectorOptions(port=0)


def figures(text: str) -> Figures:
    """Each sample's value by name and labels, as a scraper reads them."""
    out: Figures = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def one(found: Figures, name: str, **labels: str) -> float:
    return found[name][tuple(sorted(labels.items()))]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nobody listens once it is closed


@pytest.fixture(scope="module")
def hook() -> Iterator[Recorder]:
    with recording_server() as server:
        yield server


@pytest.fixture(scope="module")
def collector(
    module_collector_factory: Any, tmp_path_factory: pytest.TempPathFactory, hook: Recorder
) -> str:
    """One collector for the module, with notifications (one receiver that answers, one that
    is gone) and playbooks (one that works, one that exits 3)."""
    home = tmp_path_factory.mktemp("metrics")
    (home / "playbooks.yaml").write_text(PLAYBOOKS.format(python=sys.executable))
    (home / "notify.yaml").write_text(NOTIFY.format(good=hook.url, closed=closed_port()))
    options = ("--notify", home / "notify.yaml", "--playbooks", home / "playbooks.yaml")
    args = ("--max-body-bytes", str(MAX_BODY), *map(str, options))
    return str(module_collector_factory(extra_args=args).url)


def scrape(url: str, **headers: str) -> Figures:
    answer = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return figures(answer.text)


def loss(source: str, run: str, values: list[Any], seq: int = 1) -> dict[str, Any]:
    samples = [
        {"name": "loss", "labels": {"run": run}, "step": i, "ts": T0 + i, "value": v}
        for i, v in enumerate(values)
    ]
    return {"source": source, "seq": seq, "samples": samples}


def test_ingest_is_counted_by_format_and_refusals_by_cause(collector: str) -> None:
    before = scrape(collector)
    post = httpx.Client(base_url=collector, timeout=30)
    assert post.post("/api/v1/ingest", json=loss("j", "r-json", [1.0, 2.0, 3.0])).is_success
    again = post.post("/api/v1/ingest", json=loss("j", "r-json", [1.0, 2.0, 3.0]))
    assert again.json()["applied"] is False  # a retry: a duplicate, not new samples
    binary = encode_batch(make_batch("b", seq=1, run="r-bin", n=5))  # 10 samples
    swb = {"Content-Type": BINARY_CONTENT_TYPE}
    assert post.post("/api/v1/ingest", content=binary, headers=swb).is_success
    refusals = [
        (post.post("/api/v1/ingest", content=b"{", headers={"Content-Type": "text/csv"}), 415),
        (post.post("/api/v1/ingest", json={"seq": 1}), 400),
        (post.post("/api/v1/ingest", content=b"x" * (MAX_BODY + 1), headers=swb), 413),
        (post.post("/api/v1/ingest", content=binary[:-1] + b"\0", headers=swb), 400),
    ]
    post.close()
    assert [r.status_code for r, _ in refusals] == [want for _, want in refusals]

    after = scrape(collector)

    def grew(name: str, **labels: str) -> float:
        return one(after, name, **labels) - before.get(name, {}).get(
            tuple(sorted(labels.items())), 0.0
        )

    assert grew("stepwatch_ingest_samples_total", format="json") == 3
    assert grew("stepwatch_ingest_samples_total", format="binary") == 10
    assert grew("stepwatch_ingest_batches_total", format="json") == 1
    assert grew("stepwatch_ingest_batches_total", format="binary") == 1
    assert grew("stepwatch_ingest_duplicate_batches_total", format="json") == 1
    assert grew("stepwatch_ingest_rejected_batches_total", code="415", reason="content_type") == 1
    assert grew("stepwatch_ingest_rejected_batches_total", code="413", reason="too_large") == 1
    assert grew("stepwatch_ingest_rejected_batches_total", code="400", reason="malformed") == 2


def test_the_writer_detection_and_store_figures(collector: str) -> None:
    doc = loss("w", "r-writer", [1.0, 1.5, 2.0, 2.5])
    assert httpx.post(f"{collector}/api/v1/ingest", json=doc).is_success
    found = poll(
        lambda: (f := scrape(collector))["stepwatch_detection_samples_total"][()] >= 4 and f
    )
    assert found, "detection never saw the samples"
    commits = one(found, "stepwatch_writer_commit_seconds_count")
    assert commits >= 1
    buckets = sorted(
        (float(dict(labels)["le"]), n)
        for labels, n in found["stepwatch_writer_commit_seconds_bucket"].items()
    )
    assert buckets[-1] == (float("inf"), commits)  # +Inf holds every commit
    assert [n for _, n in buckets] == sorted(n for _, n in buckets)  # cumulative
    assert one(found, "stepwatch_writer_queued_rows") >= 0
    assert one(found, "stepwatch_writer_queued_batches") >= 0
    assert one(found, "stepwatch_detection_queued_samples") >= 0
    newest = T0 + 3  # no sample of the module is newer: the lag is wall time minus it
    lag = one(found, "stepwatch_detection_lag_seconds")
    assert time.time() - newest - 60 < lag <= time.time() - newest
    assert one(found, "stepwatch_store_file_bytes") > 0
    rss = one(found, "process_resident_memory_bytes")
    assert 0 < one(found, "stepwatch_store_memory_bytes") < rss
    assert one(found, "process_resident_memory_bytes") > 1e6
    assert one(found, "process_cpu_seconds_total") > 0
    assert one(found, "stepwatch_ready") == 1
    assert found["stepwatch_build_info"]


def test_firing_alerts_and_their_notifications(collector: str, hook: Recorder) -> None:
    doc = loss("nan", "r-nan", [1.0, "NaN"])
    assert httpx.post(f"{collector}/api/v1/ingest", json=doc).is_success

    def notified() -> Figures | None:
        found = scrape(collector)
        told = found.get("stepwatch_notifications_total", {})
        gone = told.get((("receiver", "gone"), ("result", "failed")), 0)
        return found if gone >= 1 and hook.requests else None

    found = poll(notified)
    assert found, "the notifications were never counted"
    assert one(found, "stepwatch_alerts_firing", kind="nonfinite", severity="critical") >= 1
    assert one(found, "stepwatch_alert_transitions_total") >= 1
    ok = poll(
        lambda: one(
            scrape(collector), "stepwatch_notifications_total", receiver="good", result="ok"
        )
    )
    assert ok >= 1
    assert one(found, "stepwatch_notifications_total", receiver="good", result="failed") == 0
    assert one(found, "stepwatch_notification_dropped_transitions_total") == 0


def test_playbook_runs_are_counted_by_result(collector: str) -> None:
    for name in ("works", "breaks"):
        body = {"playbook": name, "labels": {"node": "n1"}, "dry_run": False}
        assert httpx.post(f"{collector}/api/v1/actions", json=body).is_success

    def ran() -> Figures | None:
        found = scrape(collector)
        runs = found["stepwatch_playbook_runs_total"]
        return found if runs[(("result", "ok"),)] and runs[(("result", "failed"),)] else None

    found = poll(ran)
    assert found, "the playbook runs were never counted"
    assert one(found, "stepwatch_playbook_runs_total", result="ok") == 1
    assert one(found, "stepwatch_playbook_runs_total", result="failed") == 1
    assert one(found, "stepwatch_playbook_runs_total", result="timeout") == 0


def test_openmetrics_when_the_scraper_asks_for_it(collector: str) -> None:
    accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
    answer = httpx.get(f"{collector}/metrics", headers=accept)
    assert answer.headers["content-type"].startswith("application/openmetrics-text")
    assert answer.text.rstrip().endswith("# EOF")


def test_two_collectors_in_one_process_keep_their_own_figures(tmp_path: Path) -> None:
    with (
        ServerThread(tmp_path / "a.duckdb", ANYWHERE) as a,
        ServerThread(tmp_path / "b.duckdb", ANYWHERE) as b,
    ):
        assert httpx.post(f"{a.url}/api/v1/ingest", json=loss("s", "r", [1.0, 2.0])).is_success
        first, second = scrape(a.url), scrape(b.url)
    assert one(first, "stepwatch_ingest_samples_total", format="json") == 2
    assert one(second, "stepwatch_ingest_samples_total", format="json") == 0
    assert one(first, "stepwatch_store_rows", table="samples") == 2
    assert one(second, "stepwatch_store_rows", table="samples") == 0
    assert one(first, "stepwatch_store_rows", table="series") == 1


def _dropped(source: str, run: str, counts: list[float]) -> dict[str, Any]:
    """A producer's reports of its dropped samples (each the count so far), as the SDK sends."""
    labels = {"run": run, "source": source}
    samples = [
        {"name": DROPPED_SAMPLES, "labels": labels, "ts": T0 + i, "value": v}
        for i, v in enumerate(counts)
    ]
    return {"source": source, "seq": 1, "samples": samples}


def test_spools_dropped_samples_are_the_newest_report_of_each_producer(tmp_path: Path) -> None:
    with ServerThread(tmp_path / "s.duckdb", ANYWHERE) as server:
        for doc in (
            _dropped("rank0", "r1", [5.0, 12.0]),
            _dropped("rank1", "r1", [3.0]),
            _dropped("rank0", "r2", [0.0]),
            loss("rank2", "r2", [1.0]),
        ):
            assert httpx.post(f"{server.url}/api/v1/ingest", json=doc).is_success
        found = scrape(server.url)
    assert one(found, "stepwatch_spool_dropped_samples") == 15  # 12 (not 5 + 12) + 3
    assert one(found, "stepwatch_spool_dropping_producers") == 2


def test_the_store_is_counted_at_most_once_per_max_age(tmp_path: Path) -> None:
    """Counting the rows of a large store is a scan: scrapes in between reuse the counts."""
    now = [0.0]
    with Store(tmp_path / "s.duckdb") as store:
        counted = StoreFigures(store, max_age_s=30.0, monotonic=lambda: now[0])
        spools = {"spool_dropped_samples": 0, "spool_dropping_producers": 0}
        assert counted.stats() == store.stats() | spools
        store.apply([make_batch(n=4)])
        now[0] = 29.0
        assert counted.stats()["samples"] == 0  # type: ignore[index]
        now[0] = 30.0
        assert counted.stats()["samples"] == 8  # type: ignore[index]
    assert counted.stats() is None  # closed: nothing to say, no error


@pytest.fixture(scope="module")
def secured(module_collector_factory: Any) -> Any:
    """A collector with auth on, a run of a named project in it."""
    collector = module_collector_factory(auth=True)
    run = {"id": "secret-run-7", "project": "default", "start": T0}
    made = httpx.post(f"{collector.url}/api/v1/runs", json=run, headers=collector.headers)
    assert made.is_success, made.text
    doc = loss("secret-source", "secret-run-7", [1.0, "NaN"])
    assert httpx.post(f"{collector.url}/api/v1/ingest", json=doc, headers=collector.headers)
    return collector


def test_with_auth_metrics_need_a_token_that_may_read(secured: Any) -> None:
    url = f"{secured.url}/metrics"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers=secured.headers_of("ingest")).status_code == 403
    assert httpx.get(url, headers=secured.headers_of("viewer")).status_code == 200


def test_public_metrics_answer_without_a_token_and_name_no_run_nor_project(
    collector_factory: Any,
) -> None:
    public = collector_factory(auth=True, extra_args=("--metrics-public",))
    run = {"id": "secret-run-8", "project": "secret-project", "start": T0}
    assert httpx.post(f"{public.url}/api/v1/runs", json=run, headers=public.headers).is_success
    doc = loss("secret-source", "secret-run-8", [1.0, "NaN"])
    assert httpx.post(f"{public.url}/api/v1/ingest", json=doc, headers=public.headers)

    def fired() -> str:
        text = httpx.get(f"{public.url}/metrics").text  # no token
        return text if "stepwatch_alerts_firing{" in text else ""

    text = poll(fired)
    assert text, "the alert never showed among the figures"
    for name in ("secret-run", "secret-project", "secret-source"):
        assert name not in text
    assert httpx.get(f"{public.url}/api/v1/runs").status_code == 401  # only /metrics is open


def test_metrics_are_no_probe_a_foreign_host_name_is_refused(secured: Any) -> None:
    viewer = {**secured.headers_of("viewer"), "Host": "evil.example"}
    assert httpx.get(f"{secured.url}/metrics", headers=viewer).status_code == 421
