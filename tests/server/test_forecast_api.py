"""GET /runs/{id}/forecast: a run's ETA and final loss from what the collector stored, with its
stated schedule; a schedule stated wrongly is said and the rate seen used; too little is null."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from stepwatch.predict import LossLaw, LrSchedule, lr_areas

T0, TOTAL, SEEN, STEP_S, EVAL_EVERY, EVAL_S = 1_780_000_000.0, 3000, 1200, 0.5, 400, 20.0
SCHEDULE = {"type": "cosine", "peak_lr": 3e-3, "warmup_steps": 100, "final_lr": 3e-4,
            "total_steps": TOTAL}  # fmt: skip


def _truth() -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Every planned step's time, loss and rate; the true ETA from step SEEN - 1, final loss."""
    rng = np.random.default_rng(7)
    took = STEP_S * (1 + rng.normal(0.0, 0.03, TOTAL))
    took[EVAL_EVERY::EVAL_EVERY] += EVAL_S
    ts = T0 + np.cumsum(took)
    lr = LrSchedule.from_config(SCHEDULE).lr(np.arange(TOTAL))
    curve = LossLaw(2.0, 1.2, 0.5, 0.3).loss(*lr_areas(lr))
    loss = curve + rng.normal(0.0, 0.03, TOTAL)
    return ts, loss, lr, float(ts[-1] - ts[SEEN - 1]), float(curve[-50:].mean())


def _send(client: httpx.Client, run: str, config: dict[str, Any], lr_too: bool = True) -> None:
    ts, loss, lr, _, _ = _truth()
    doc = {"id": run, "project": "p", "config": config, "planned_total_steps": TOTAL,
           "start": T0}  # fmt: skip
    assert client.post("/api/v1/runs", json=doc).is_success
    names = [("train.loss", loss)] + ([("train.lr", lr)] if lr_too else [])
    samples = [
        {"name": name, "labels": {"run": run, "rank": "0"}, "step": s, "ts": ts[s], "value": v[s]}
        for s in range(SEEN)
        for name, v in names
    ]
    samples += [  # the evaluations the run logs, at the steps they paused
        {"name": "eval.loss", "labels": {"run": run}, "step": s, "ts": ts[s], "value": 2.0}
        for s in range(EVAL_EVERY, SEEN, EVAL_EVERY)
    ]
    sent = client.post("/api/v1/ingest", json={"source": run, "seq": 1, "samples": samples})
    assert sent.is_success, sent.text


def _forecast(client: httpx.Client, run: str) -> dict[str, Any]:
    """The forecast, once the ingest answered (so the samples are stored)."""
    got: dict[str, Any] = client.get(f"/api/v1/runs/{run}/forecast").json()
    assert got["at_step"] == SEEN - 1
    return got


def test_a_run_with_its_schedule_gets_its_eta_and_final_loss(client: httpx.Client) -> None:
    _send(client, "r1", {"lr_schedule": SCHEDULE})
    got = _forecast(client, "r1")
    _, _, _, eta, final = _truth()
    assert (got["run"], got["planned_total_steps"], got["schedule"]) == ("r1", TOTAL, "stated")
    assert got["schedule_error"] is None and got["basis"] == "schedule"
    assert got["eta_s"] == pytest.approx(eta, rel=0.03)
    assert got["eta_s_p10"] <= got["eta_s"] <= got["eta_s_p90"]
    assert got["naive_eta_s"] < 0.95 * eta  # it misses the evaluations to come
    assert got["final_loss_p50"] == pytest.approx(final, rel=0.03)
    assert got["final_loss_p10"] < got["final_loss_p50"] < got["final_loss_p90"]
    spent = got["goodput"]  # the run started at T0 (its doc's start): no start-up
    assert spent["evaluation_s"] == pytest.approx(EVAL_S * ((SEEN - 1) // EVAL_EVERY), rel=0.05)
    assert spent["stalls_s"] == spent["lost_s"] == spent["checkpoint_s"] == 0.0
    assert spent["goodput"] == pytest.approx(spent["productive_s"] / spent["wall_s"])


def test_a_schedule_stated_wrongly_is_said_and_the_rate_seen_is_used(
    client: httpx.Client,
) -> None:
    _send(client, "r2", {"lr_schedule": {**SCHEDULE, "type": "step"}})
    got = _forecast(client, "r2")
    assert got["schedule"] is None and got["basis"] == "observed"
    assert got["schedule_error"] == (
        "lr_schedule.type: 'step' is not one of cosine, linear, wsd, inv_sqrt, constant"
    )
    assert got["final_loss_p50"] is not None and got["eta_s"] is not None


def test_without_a_loss_or_a_plan_the_figures_are_null(client: httpx.Client) -> None:
    assert client.post("/api/v1/runs", json={"id": "r3", "project": "p"}).is_success
    got = client.get("/api/v1/runs/r3/forecast").json()
    assert got["at_step"] is None and got["eta_s"] is None and got["final_loss_p50"] is None
    assert got["goodput"] is None
    assert client.get("/api/v1/runs/nope/forecast").status_code == 404


def test_goodput_per_node_reads_each_nodes_lowest_rank(client: httpx.Client) -> None:
    ts, _, _, _, _ = _truth()
    assert client.post("/api/v1/runs", json={"id": "r4", "project": "p", "start": T0}).is_success
    node_ts = {"node0": ts, "node1": ts + np.where(np.arange(TOTAL) >= 700, 15.0, 0.0)}
    samples = [
        {"name": name, "labels": {"run": "r4", "node": node, "rank": str(rank)}, "step": s,
         "ts": node_ts[node][s], "value": value}
        for node, rank in (("node0", 0), ("node1", 8), ("node1", 9))
        for name, value in (("train.step_time_s", STEP_S), ("train.data_time_s", 0.1))
        for s in range(SEEN)
    ]  # fmt: skip
    sent = client.post("/api/v1/ingest", json={"source": "r4", "seq": 1, "samples": samples})
    assert sent.is_success, sent.text
    got = client.get("/api/v1/runs/r4/forecast").json()
    nodes = got["goodput_by_node"]
    assert sorted(nodes) == ["node0", "node1"] and got["goodput"] is None  # no loss logged
    assert nodes["node0"]["stalls_s"] == pytest.approx(EVAL_S * 2, rel=0.05)  # no evaluations
    assert nodes["node1"]["stalls_s"] == pytest.approx(EVAL_S * 2 + 15.0, rel=0.05)
    assert nodes["node0"]["data_wait_s"] == pytest.approx(0.1 * (SEEN - 1), rel=0.01)
