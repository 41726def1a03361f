"""The store's upkeep in a live collector: retention applied as it runs, the disk-limit alert
raised through the ordinary alert path, shedding before ingest fails, 507 only when nothing
can go."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from stepwatch.model import SampleBatch, SeriesKey
from stepwatch.server._upkeep import SHED_AT, StoreUpkeep
from stepwatch.store import DiskCap, Retention, Store

#: Short ages a test can span: samples of the last 3 hours outlive raw retention by 2.
RETENTION = "raw=1h,10s=1d,300s=2d,events=1h"
FAST = ("--upkeep-interval", "0.2")


def _doc(seq: int, ts: np.ndarray, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    samples = [
        {"name": "gpu.util_pct", "labels": {"node": "n0", "gpu": "0"}, "ts": t, "value": i % 97}
        for i, t in enumerate(ts.tolist())
    ]
    return {"source": "agent-n0", "seq": seq, "samples": samples, "events": events or []}


def _until(check: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (got := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return got


def test_samples_past_raw_retention_go_while_their_rollups_still_answer(
    collector_factory: Any,
) -> None:
    collector = collector_factory(extra_args=("--retention", RETENTION, *FAST))
    now = time.time()
    ts = now - 3 * 3600 + 10.0 * np.arange(1081)  # every 10 s for 3 hours, up to now
    events = [
        {"ts": now - 2 * 3600, "kind": "checkpoint", "text": "old"},
        {"ts": now - 60, "kind": "checkpoint", "text": "new"},
    ]
    with httpx.Client(base_url=collector.url, timeout=30) as api:
        assert api.post("/api/v1/ingest", json=_doc(1, ts, events)).json()["applied"]
        ((series,),) = [[s["id"]] for s in api.get("/api/v1/series").json()]
        horizon = math.floor((ts.max() - 3600) / 300) * 300

        def raw(**params: float) -> list[float]:
            got = api.get("/api/v1/query/raw", params={"series": series, **params}).json()
            return list(got["ts"])

        _until(lambda: not raw(end=horizon - 1))  # compacted, then deleted
        assert raw(start=horizon) == ts[ts >= horizon].tolist()  # the last hour is all there
        start = math.ceil(ts.min() / 300) * 300
        got = api.get(
            "/api/v1/query/downsample",
            params={
                "series": series,
                "start": start,
                "end": horizon,
                "points": (horizon - start) / 300,
            },
        ).json()
        assert sum(got["count"]) == int(((ts >= start) & (ts <= horizon)).sum())
        assert all(b % 300 == 0 for b in got["ts"])  # the 300 s tier's buckets
        texts = [e["text"] for e in api.get("/api/v1/events", params={"kind": "checkpoint"}).json()]
        assert texts == ["new"]


def test_a_small_disk_cap_raises_the_collectors_own_alert_and_refuses_ingest(
    collector_factory: Any,
) -> None:
    collector = collector_factory(extra_args=("--max-store-bytes", "1", *FAST))
    with httpx.Client(base_url=collector.url, timeout=30) as api:

        def firing() -> list[dict[str, Any]]:
            alerts = api.get("/api/v1/alerts", params={"kind": "disk_full"}).json()
            return [a for a in alerts if a["rule"] == "store_disk_full"]

        (alert,) = _until(firing)
        assert alert["state"] == "firing" and alert["labels"] == {}
        assert "of its disk limit" in alert["annotations"]["summary"]

        def refused() -> httpx.Response | None:
            sent = api.post("/api/v1/ingest", json=_doc(1, np.full(3, time.time())))
            return sent if sent.status_code == 507 else None

        answer = _until(refused)
        assert "no old data left to shed" in answer.json()["error"]
        assert answer.headers["Retry-After"] == "60"
        assert api.get("/api/v1/series").json() == []  # nothing of the refused batch stored
        forged = _doc(2, np.full(1, time.time()))
        forged["samples"][0]["name"] = "stepwatch.collector.store_used_ratio"
        answer = api.post("/api/v1/ingest", json=forged)  # no producer raises that alert
        assert answer.status_code == 400 and "is the collector's own" in answer.json()["error"]


def _fill(store: Store, days: float) -> None:
    """A sample a second of 20 series over ``days`` ending now, compacted."""
    keys = [SeriesKey.of("host.cpu_pct", {"node": f"n{i}"}) for i in range(20)]
    n = int(days * 86_400)
    ts = np.repeat(time.time() - n + np.arange(n, dtype=np.float64), 20)
    series = np.tile(np.arange(20, dtype=np.uint32), n)
    value = np.random.default_rng(0).uniform(0, 100, ts.size)
    store.apply([SampleBatch("agent", 1, keys, series, ts, np.full(ts.size, -1), value)])
    store.compact()


def test_near_its_cap_the_store_sheds_the_oldest_raw_data_instead_of_failing_ingest(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "store.duckdb") as store:
        _fill(store, 0.25)
        used, samples = store.footprint.disk_bytes(), store.stats()["samples"]
        fed: list[SampleBatch] = []
        upkeep = StoreUpkeep(store, fed.extend, Retention(), DiskCap(max_bytes=int(used * 0.9)))

        def under_the_cap() -> bool:
            upkeep.tick()
            assert not upkeep.full  # there was always something to shed
            return bool(fed[-1].value[0] < SHED_AT)

        _until(under_the_cap, timeout_s=120)
        assert (
            store.retention.kept().raw > -math.inf
        )  # the raw horizon moved: the oldest samples went
        assert 0 < store.stats()["samples"] < samples
        assert store.footprint.disk_bytes() < used
        assert len(store.latest()) == 20  # the coarse tier still holds every series

        tiny = StoreUpkeep(store, fed.extend, Retention(), DiskCap(max_bytes=1))
        _until(lambda: tiny.tick() or tiny.full, timeout_s=120)  # all it could shed is gone
        assert len(store.latest()) == 20


def test_what_the_log_holds_goes_into_the_file_while_readers_keep_coming(
    collector_factory: Any,
) -> None:
    """DuckDB gives up its own checkpoint while other transactions are open; the upkeep's
    does not, so the log (and the memory what it holds takes) does not grow without end."""
    collector = collector_factory(extra_args=FAST)
    wal = collector.store_path.with_name(collector.store_path.name + ".wal")
    now = time.time()
    with httpx.Client(base_url=collector.url, timeout=30) as api:
        for seq in range(1, 6):
            ts = now - 600 + seq * 100 + np.arange(100, dtype=np.float64)
            assert api.post("/api/v1/ingest", json=_doc(seq, ts)).json()["applied"]
            api.get("/api/v1/runs")  # a reader's transaction, as the page's are
        _until(lambda: not wal.exists() or wal.stat().st_size == 0)
        assert len(api.get("/api/v1/series").json()) == 1
