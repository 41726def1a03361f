"""The run's forecast on the dashboard: the loss cone on the loss chart up to the planned last
step, the ETA, final loss and chance of success as the API answers them, where the time went
per node, the advice the data supports, the runs list's ETA, and all of it following new steps."""

from __future__ import annotations

import math
import time
from typing import Any

import httpx
import pytest
from conftest import Collector, CollectorFactory, poll
from playwright.sync_api import Page, expect

from .conftest import Dashboard

RUN = "forecast-run"
#: A second run, given more steps by a test while the page shows it.
LIVE = "forecast-live"
#: A run a tenth of the way to its planned end.
YOUNG = "forecast-young"
PLANNED = 1000
SEEN = 400
YOUNG_SEEN = 100
#: An evaluation every this many steps, pausing the run ``EVAL_S`` seconds.
EVAL_EVERY = 100
EVAL_S = 20.0
#: Each step waits this long of its second for data: over a tenth, so the advice says to add
#: data-loader workers.
DATA_WAIT_S = 0.3
WORKERS = 2
NODES = ("node0", "node1")
SCHEDULE = {"type": "cosine", "peak_lr": 3e-4, "warmup_steps": 50, "final_lr": 3e-5,
            "total_steps": PLANNED}  # fmt: skip
#: When the first batch of steps ends before now, leaving room for the steps a test adds.
T0 = time.time() - 600.0
#: Waits of the page: a forecast is asked for at most every 10 s, live data every 2 s.
FOLLOWS_MS = 40_000


def _lr(step: int) -> float:
    peak, final, warmup = SCHEDULE["peak_lr"], SCHEDULE["final_lr"], SCHEDULE["warmup_steps"]
    if step < warmup:
        return peak * step / warmup
    done = (step - warmup) / (PLANNED - warmup)
    return final + 0.5 * (peak - final) * (1.0 + math.cos(math.pi * done))


def _ts(step: int) -> float:
    """When a step ended: 10 s of start-up, a second a step (give or take), the evaluations."""
    return T0 + 10.0 + step + 0.1 * math.sin(1.3 * step) + EVAL_S * (step // EVAL_EVERY)


def _samples(run: str, steps: range) -> list[dict[str, Any]]:
    """What the trainer logs at each step: loss and rate (rank 0), each node's step time and
    data wait, and the evaluation loss every ``EVAL_EVERY`` steps."""
    out: list[dict[str, Any]] = []
    for s in steps:
        ts, loss = _ts(s), 2.0 + 3.0 / math.sqrt(1.0 + s / 20.0) + 0.01 * math.sin(1.7 * s)
        out.append(
            {"name": "train.loss", "labels": {"run": run}, "step": s, "ts": ts, "value": loss}
        )
        out.append(
            {"name": "train.lr", "labels": {"run": run}, "step": s, "ts": ts, "value": _lr(s)}
        )
        for rank, node in enumerate(NODES):
            labels = {"run": run, "node": node, "rank": str(rank)}
            for name, value in (("train.step_time_s", 1.0), ("train.data_time_s", DATA_WAIT_S)):
                out.append({"name": name, "labels": labels, "step": s, "ts": ts, "value": value})
        if s and s % EVAL_EVERY == 0:
            out.append(
                {"name": "eval.loss", "labels": {"run": run}, "step": s, "ts": ts, "value": loss}
            )
    return out


def _send(collector: Collector, run: str, steps: range) -> None:
    """Ingest the steps as the run's trainer would, a document per 1,000 samples (numbered by
    their first step: later steps, later documents)."""
    samples = _samples(run, steps)
    for i in range(0, len(samples), 1000):
        chunk = samples[i : i + 1000]
        doc = {"source": f"trainer-{run}", "seq": chunk[0]["step"] + 1, "samples": chunk}
        httpx.post(f"{collector.url}/api/v1/ingest", json=doc, timeout=30).raise_for_status()


def _api(collector: Collector, path: str) -> Any:
    response = httpx.get(f"{collector.url}/api/v1/{path}", timeout=30)
    response.raise_for_status()
    return response.json()


def _summary(collector: Collector, run: str) -> dict[str, Any]:
    (found,) = [r for r in _api(collector, "runs/summary") if r["id"] == run]
    return dict(found)


@pytest.fixture(scope="module")
def collector(module_collector_factory: CollectorFactory) -> Collector:
    """A collector forecasting every second, with both runs' first ``SEEN`` steps, returned
    once the runs list has their forecasts."""
    found = module_collector_factory(extra_args=("--forecast-interval", "1"))
    for run, seen in ((RUN, SEEN), (LIVE, SEEN), (YOUNG, YOUNG_SEEN)):
        config = {"lr_schedule": SCHEDULE, "num_workers": WORKERS}
        body = {"id": run, "project": "default", "name": run, "start": T0,
                "planned_total_steps": PLANNED, "config": config}  # fmt: skip
        httpx.post(f"{found.url}/api/v1/runs", json=body, timeout=30).raise_for_status()
        _send(found, run, range(seen))
    for run in (RUN, LIVE, YOUNG):
        ready = poll(lambda run=run: _summary(found, run)["success_probability"] is not None)
        assert ready, f"no forecast of {run} in the runs list"
    return found


@pytest.fixture
def board(page: Page, collector: Collector) -> Dashboard:
    return Dashboard(page, collector.url)


def _duration(page: Page, seconds: float) -> str:
    """How the page writes a duration (its own formatter)."""
    text = page.evaluate("async (s) => (await import('/ui/js/util.js')).fmtDuration(s)", seconds)
    return str(text)


def _field(page: Page, name: str) -> tuple[float, str]:
    """A fact of the forecast panel: its value and the figure shown."""
    fact = page.locator(f'[data-forecast][data-ready="1"] [data-field="{name}"]')
    return float(fact.get_attribute("data-value") or "nan"), fact.locator("strong").inner_text()


def test_the_run_view_shows_the_forecast_goodput_and_advice(
    board: Dashboard, collector: Collector
) -> None:
    page = board.page
    view = board.open("overview", run=RUN)
    chart = board.chart("train.loss", min_points=10)
    fc = _api(collector, f"runs/{RUN}/forecast")
    assert fc["basis"] == "schedule" and fc["loss_cone"]["step"][-1] == PLANNED - 1

    # The loss chart draws the cone after the data, its x axis up to the planned last step.
    expect(chart.locator(".u-legend")).to_contain_text("forecast p50 (band p10–p90)")
    expect(chart).to_have_attribute("data-x-end", str(PLANNED - 1))

    panel = view.locator('[data-forecast][data-ready="1"]')
    eta, shown = _field(page, "eta")
    assert eta == pytest.approx(fc["eta_s"]) and shown == _duration(page, fc["eta_s"])
    low, high = _duration(page, fc["eta_s_p10"]), _duration(page, fc["eta_s_p90"])
    expect(panel.locator('[data-field="eta"]')).to_contain_text(f"p10–p90 {low} – {high}")
    expect(panel.locator('[data-field="eta"]')).to_contain_text(f"planned end (step {PLANNED:,})")
    chance, shown = _field(page, "success")
    assert chance == pytest.approx(fc["success_probability"])
    assert shown == f"{round(100 * fc['success_probability'])} %"
    final, _ = _field(page, "final-loss")
    assert final == pytest.approx(fc["final_loss_p50"])
    basis = panel.locator('[data-field="basis"]')
    expect(basis).to_contain_text("the learning-rate schedule the run states")
    expect(basis).to_contain_text(f"{SEEN} of {PLANNED:,} planned steps")
    expect(panel.locator('[data-field="schedule-error"]')).to_have_count(0)

    # A bar for the run and one per node, each segment's seconds as the API says them.
    for name, spent in [("run", fc["goodput"]), *fc["goodput_by_node"].items()]:
        bar = view.locator(f'[data-goodput="{name}"]')
        for bucket in ("productive_s", "data_wait_s", "evaluation_s"):
            segment = bar.locator(f'[data-bucket="{bucket}"]')
            assert float(segment.get_attribute("data-seconds") or 0) == pytest.approx(spent[bucket])
    assert set(fc["goodput_by_node"]) == set(NODES)
    expect(view.locator(".gp-legend")).to_contain_text("data wait")

    # The data wait argues for more data-loader workers: the item says why and what to change.
    item = view.locator('[data-advice][data-kind="dataloader_workers"]')
    expect(item).to_contain_text("Add data-loader workers")
    expect(item).to_contain_text("data_wait_pct")
    expect(item).to_contain_text(f"num_workers: {WORKERS} → {WORKERS + 1}")


def test_a_young_run_s_cone_leaves_its_data_a_third_of_the_chart(board: Dashboard) -> None:
    board.open("overview", run=YOUNG)
    chart = board.chart("train.loss", min_points=10)
    expect(chart.locator(".u-legend")).to_contain_text("forecast p50 (band p10–p90)")
    x_end = float(chart.get_attribute("data-x-end") or 0)
    assert YOUNG_SEEN < x_end <= 3 * YOUNG_SEEN  # not the planned end, 1,000 steps away


def test_a_range_zoomed_into_the_past_has_no_cone(board: Dashboard, collector: Collector) -> None:
    run = _summary(collector, RUN)
    board.open("overview", run=RUN, **{"from": str(T0), "to": str(run["last_ts"] - 60)})
    chart = board.chart("train.loss", min_points=10)
    expect(chart.locator(".u-legend")).not_to_contain_text("forecast")
    assert int(float(chart.get_attribute("data-x-end") or 0)) < SEEN


def test_the_runs_list_shows_the_forecast_eta_and_chance(
    board: Dashboard, collector: Collector
) -> None:
    page = board.page
    run = _summary(collector, RUN)
    view = board.open("runs")
    row = view.locator(f'[data-run-id="{RUN}"]')
    eta = row.locator('[data-col="eta"]')
    expect(eta).to_contain_text(_duration(page, run["eta_s"]))
    low, high = _duration(page, run["eta_s_p10"]), _duration(page, run["eta_s_p90"])
    expect(eta).to_contain_text(f"{low} – {high}")
    chance = row.locator('[data-col="success"]')
    expect(chance).to_have_text(f"{round(100 * run['success_probability'])} %")
    assert float(chance.get_attribute("data-value") or 0) == pytest.approx(
        run["success_probability"]
    )


def test_the_forecast_follows_new_steps(board: Dashboard, collector: Collector) -> None:
    view = board.open("overview", run=LIVE)
    basis = view.locator('[data-forecast][data-ready="1"] [data-field="basis"]')
    expect(basis).to_contain_text(f"{SEEN} of {PLANNED:,} planned steps")

    _send(collector, LIVE, range(SEEN, SEEN + EVAL_EVERY))
    expect(basis).to_contain_text(f"{SEEN + EVAL_EVERY} of {PLANNED:,}", timeout=FOLLOWS_MS)
    fc = _api(collector, f"runs/{LIVE}/forecast")
    eta, _ = _field(board.page, "eta")
    assert fc["at_step"] == SEEN + EVAL_EVERY - 1 and eta == pytest.approx(fc["eta_s"])
    chart = board.chart("train.loss", min_points=10)
    expect(chart).to_have_attribute("data-x-end", str(PLANNED - 1))
