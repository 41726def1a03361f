"""The forecasting worker in a real collector: a running run that logged steps is forecast and
the forecast kept; the runs list's ETA is the forecast's, pauses to come included, not the
naive one; a finished run is not forecast; the forecasts outlive a restart. A bounded read
takes the whole span in buckets and the last steps whole, and forecasts as the whole does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from stepwatch.model import Run, SampleBatch, SeriesKey
from stepwatch.predict import forecast_eta
from stepwatch.server._forecasting import forecast_bounded
from stepwatch.server._run_series import Bounds, bounded_series, pick_series
from stepwatch.store import Store

from .conftest import LiveFactory

T0, TOTAL, SEEN, STEP_S, EVAL_EVERY, EVAL_S = 1_780_000_000.0, 3000, 1500, 0.5, 400, 60.0
WAIT_S = 60.0


def _times(seen: int = SEEN) -> np.ndarray:
    """When each step was seen: half a second each, an evaluation of a minute every 400 steps."""
    took = STEP_S * (1 + np.random.default_rng(3).normal(0.0, 0.02, seen))
    took[EVAL_EVERY::EVAL_EVERY] += EVAL_S
    return T0 + np.cumsum(took)


def _send(
    client: httpx.Client, run: str, status: str = "running", seen: int = SEEN, first: int = 0
) -> None:
    """The run, its loss and rate at steps ``first`` to ``seen`` - 1, as its rank 0 logs them
    (in one batch, the next of the run's source); then its end, unless ``running`` (an ended
    run is never running: it is made in its status, so no pass of the worker sees it run)."""
    ts, every = _times(seen), np.arange(seen)
    doc = {"id": run, "project": "p", "planned_total_steps": TOTAL, "start": T0}
    if status != "running":
        doc["status"] = status
    assert client.post("/api/v1/runs", json=doc).is_success
    loss = 2.0 + 3.0 * (every + 10.0) ** -0.3 + np.random.default_rng(4).normal(0, 0.01, seen)
    labels = {"run": run, "rank": "0"}
    samples = [
        {"name": name, "labels": labels, "step": int(s), "ts": float(ts[s]), "value": float(v)}
        for s in every[first:]
        for name, v in (("train.loss", loss[s]), ("train.lr", 1e-3))
    ]
    batch = {"source": run, "seq": 1 + first, "samples": samples}
    sent = client.post("/api/v1/ingest", json=batch)
    assert sent.is_success, sent.text
    if status != "running":
        ended = {"status": status, "end": float(ts[-1])}
        assert client.post(f"/api/v1/runs/{run}/finish", json=ended).is_success


def _summary(client: httpx.Client, run: str) -> dict[str, Any]:
    (row,) = client.get("/api/v1/runs/summary", params={"run": run}).json()
    return dict(row)


def _forecast_kept(client: httpx.Client, run: str) -> dict[str, Any]:
    """The run's summary once the worker has kept a forecast of it."""
    deadline = time.monotonic() + WAIT_S
    while (row := _summary(client, run))["final_loss_p50"] is None:
        assert time.monotonic() < deadline, f"no forecast of {run} within {WAIT_S} s"
        time.sleep(0.1)
    return row


def test_a_running_run_gets_the_forecast_eta_not_the_naive_one(
    live_factory: LiveFactory, tmp_path: Path
) -> None:
    server = live_factory(store="s.duckdb", forecast_interval_s=0.2)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        _send(client, "r1")
        _send(client, "done", status="finished")
        row = _forecast_kept(client, "r1")
        asked = client.get("/api/v1/runs/r1/forecast").json()
    # the worker read all of this short run: its forecast is the route's, to the last figure
    assert (row["eta_s"], row["eta_s_p10"], row["eta_s_p90"]) == pytest.approx(
        (asked["eta_s"], asked["eta_s_p10"], asked["eta_s_p90"])
    )
    assert (row["final_loss_p10"], row["final_loss_p50"], row["final_loss_p90"]) == pytest.approx(
        (asked["final_loss_p10"], asked["final_loss_p50"], asked["final_loss_p90"])
    )
    assert row["success_probability"] == pytest.approx(asked["success_probability"])
    assert 0 < row["success_probability"] <= 1
    assert row["eta_s_p10"] <= row["eta_s"] <= row["eta_s_p90"]
    naive = (TOTAL - SEEN) / row["steps_per_s"]  # the recent pace misses the evaluations to come
    truth = (TOTAL - SEEN) * STEP_S + 4 * EVAL_S  # at steps 1600, 2000, 2400 and 2800
    assert abs(row["eta_s"] - truth) < 0.03 * truth < abs(naive - truth)
    server.stop()
    with Store(tmp_path / "s.duckdb") as store:
        assert store.forecasts.get("done") is None  # finished: never forecast
        kept = store.forecasts.get("r1")
    assert kept is not None and kept.at_step == SEEN - 1 and kept.data_ts == _times()[-1]


def test_the_forecasts_outlive_a_restart_and_follow_new_steps(live_factory: LiveFactory) -> None:
    first = live_factory(store="s.duckdb", forecast_interval_s=0.2)
    with httpx.Client(base_url=first.url, timeout=30) as client:
        _send(client, "r1", seen=600)
        before = _forecast_kept(client, "r1")
    first.stop()
    second = live_factory(store="s.duckdb", forecast_interval_s=3600.0)  # no pass during the test
    with httpx.Client(base_url=second.url, timeout=30) as client:
        assert _summary(client, "r1")["eta_s"] == pytest.approx(before["eta_s"])
    second.stop()
    third = live_factory(store="s.duckdb", forecast_interval_s=0.2)
    with httpx.Client(base_url=third.url, timeout=30) as client:
        _send(client, "r1", first=600)  # 600 steps more
        deadline = time.monotonic() + WAIT_S
        while _summary(client, "r1")["eta_s"] == pytest.approx(before["eta_s"]):
            assert time.monotonic() < deadline, "the new steps were not forecast"
            time.sleep(0.1)
        after = _summary(client, "r1")
    assert after["eta_s"] < before["eta_s"] - 200  # 600 steps nearer the end


def test_a_project_s_finished_runs_lend_their_law_to_its_running_one(
    live_factory: LiveFactory, tmp_path: Path
) -> None:
    server = live_factory(store="s.duckdb", forecast_interval_s=0.2)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        _send(client, "a", status="finished", seen=TOTAL)
        _send(client, "b", status="finished", seen=TOTAL)
        _send(client, "short", status="finished", seen=SEEN)  # ended before its plan: not lent
        _send(client, "r1", seen=900)
        row = _forecast_kept(client, "r1")
        asked = client.get("/api/v1/runs/r1/forecast").json()
    server.stop()
    with Store(tmp_path / "s.duckdb") as store:
        law, kept = store.forecasts.law("p"), store.forecasts.get("r1")
    assert law is not None and law.data["runs"] == 2 and law.newest_end == _times(TOTAL)[-1]
    assert kept is not None and kept.data["project_runs"] == 2 == asked["project_runs"]
    assert row["final_loss_p50"] == pytest.approx(asked["final_loss_p50"])


def test_an_option_that_is_not_an_interval_is_refused(live_factory: LiveFactory) -> None:
    with pytest.raises(ValueError, match="forecast interval must be 0"):
        live_factory(forecast_interval_s=-1.0)


def test_a_bounded_read_takes_buckets_then_the_last_steps_whole(tmp_path: Path) -> None:
    key = SeriesKey.of("train.loss", {"run": "r1", "rank": "0"})
    seen = 2500
    ts, steps = _times(seen), np.arange(seen)
    loss = 2.0 + 3.0 * (steps + 10.0) ** -0.3
    with Store(tmp_path / "s.duckdb") as store:
        store.upsert_run(Run("r1", "p", "r1", start=T0, planned_total_steps=TOTAL))
        rows = np.zeros(seen, np.uint32)
        store.apply([SampleBatch("src", 1, [key], rows, ts, steps, loss, [])])
        chosen = pick_series(store, "train.loss", {"run": "r1"})
        assert chosen is not None
        bounds = Bounds(buckets=50, tail_steps=500)
        got = bounded_series(store, chosen, T0, float(ts[-1]), bounds)
        run = store.get_run("r1")
        assert run is not None
        answer = forecast_bounded(store, run, chosen, float(ts[-1]), bounds)
    known = ~np.isnan(got.ts)
    tail = got.step[known]
    assert tail[-1] == seen - 1 and 500 <= len(tail) < 500 + seen / 50 + 1  # a bucket's worth
    np.testing.assert_array_equal(got.ts[known], ts[tail])  # the tail whole, as seen
    assert 0 < (~known).sum() <= 50 and (got.step[~known] < tail[0]).all()
    np.testing.assert_array_equal(got.value, loss[got.step])
    eta = forecast_eta(tail, ts[tail], TOTAL)  # the ETA paces the run from its tail alone
    assert eta is not None and answer["eta_s"] == pytest.approx(eta.eta_s)
    assert answer["at_step"] == seen - 1 and answer["final_loss_p50"] is not None
