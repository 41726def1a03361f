"""The forecast kept of each run: a row a run, replaced, kept across a reopen and a migration
from the version before it; the runs list's ETA is the kept forecast's while it is current.
The law of each project's finished runs: a row a project, replaced, kept likewise."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from stepwatch.model import Run, RunStatus, SeriesKey
from stepwatch.store import Store
from stepwatch.store._schema import SCHEMA_VERSION, upgrade

from .conftest import T0, batch

LOSS = SeriesKey.of("train.loss", {"run": "r1", "rank": "0"})
PLANNED = 1000


def _answer(**figures: Any) -> dict[str, Any]:
    """A forecast as ``forecast_run`` answers it."""
    return {
        "at_step": 99, "planned_total_steps": PLANNED, "schedule": None, "schedule_error": None,
        "eta_s": 2000.0, "eta_s_p10": 1900.0, "eta_s_p90": 2200.0, "naive_eta_s": 900.0,
        "step_s": 1.0, "final_loss_p10": 1.9, "final_loss_p50": 2.0, "final_loss_p90": 2.1,
        "basis": "observed", **figures,
    }  # fmt: skip


def _run(store: Store, status: str = RunStatus.RUNNING, planned: int = PLANNED) -> None:
    """Run r1 with 100 steps of loss, one a second from T0 (newest at T0 + 99)."""
    store.upsert_run(Run("r1", "p", "r1", status=status, start=T0, planned_total_steps=planned))
    steps = np.arange(100)
    store.apply([batch([LOSS], np.zeros(100, int), T0 + steps, 3.0 - steps / 100, step=steps)])


def test_a_forecast_is_kept_replaced_and_read_back_after_a_reopen(store_path: Path) -> None:
    with Store(store_path) as store:
        assert store.forecasts.get("r1") is None
        store.forecasts.put("r1", T0 + 5, T0 + 3, _answer(eta_s=10.0))
        store.forecasts.put("r1", T0 + 9, T0 + 8, _answer(eta_s=np.float64(7.5), basis="steps"))
        store.forecasts.put("r2", T0 + 9, T0 + 8, _answer(eta_s=None, final_loss_p50=math.nan))
    with Store(store_path) as store:
        kept = store.forecasts.of_runs(["r1", "r2", "r3"])
    assert sorted(kept) == ["r1", "r2"]
    r1, r2 = kept["r1"], kept["r2"]
    assert (r1.made_at, r1.data_ts, r1.at_step, r1.eta_s) == (T0 + 9, T0 + 8, 99, 7.5)
    assert r1.data["basis"] == "steps" and r1.success_probability is None
    assert r2.eta_s is None and r2.final_loss_p50 is None and r2.final_loss_p90 == 2.1


#: The schema steps that made the forecasts table and the project laws' table.
FORECASTS_STEP, LAWS_STEP = 6, 7


def test_a_store_of_the_version_before_gets_the_table_and_keeps_its_data(
    store_path: Path,
) -> None:
    with duckdb.connect(str(store_path)) as con:
        upgrade(con, FORECASTS_STEP - 1)
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert "forecasts" not in tables
    with Store(store_path) as store:
        _run(store)
    with Store(store_path) as store:
        store.forecasts.put("r1", T0 + 100, T0 + 99, _answer())
        (summary,) = store.run_summaries()
        assert summary.step == 99 and summary.eta_s == 2000.0


def test_the_summary_takes_the_forecast_less_the_data_time_since(store: Store) -> None:
    _run(store)
    store.forecasts.put("r1", T0 + 100, T0 + 89, _answer(success_probability=0.8))
    (s,) = store.run_summaries()
    assert (s.eta_s, s.eta_s_p10, s.eta_s_p90) == (1990.0, 1890.0, 2190.0)  # 10 s of data since
    assert (s.final_loss_p10, s.final_loss_p50, s.final_loss_p90) == (1.9, 2.0, 2.1)
    assert s.success_probability == 0.8
    store.forecasts.put("r1", T0 + 100, T0 - 2000, _answer())
    (s,) = store.run_summaries()
    assert (s.eta_s, s.eta_s_p10, s.eta_s_p90) == (0.0, 0.0, 101.0)  # never below 0


@pytest.mark.parametrize(
    ("why", "answer", "status", "planned"),
    [
        ("no forecast", None, RunStatus.RUNNING, PLANNED),
        ("made for another plan", _answer(), RunStatus.RUNNING, 2 * PLANNED),
        ("at a step not reached (a restart went back)", _answer(at_step=150), "running", PLANNED),
        ("no ETA in it", _answer(eta_s=None), RunStatus.RUNNING, PLANNED),
    ],
)
def test_without_a_current_forecast_the_eta_is_the_naive_one(
    store: Store, why: str, answer: dict[str, Any] | None, status: str, planned: int
) -> None:
    _run(store, status, planned)
    if answer is not None:
        store.forecasts.put("r1", T0 + 100, T0 + 99, answer)
    (s,) = store.run_summaries()
    assert s.eta_s == pytest.approx(planned - 100), why  # a step a second
    assert (s.eta_s_p10, s.final_loss_p50, s.success_probability) == (None, None, None), why


def test_a_finished_run_has_no_eta_nor_forecast(store: Store) -> None:
    _run(store)
    store.forecasts.put("r1", T0 + 100, T0 + 99, _answer())
    store.finish_run("r1", RunStatus.FINISHED, T0 + 100)
    (s,) = store.run_summaries()
    assert (s.eta_s, s.eta_s_p90, s.final_loss_p50) == (None, None, None)


def test_a_project_law_is_kept_replaced_and_survives_a_reopen(store_path: Path) -> None:
    law = {"l0": 1.0, "a": 2.0, "alpha": 0.3, "c": 0.1, "momentum": 0.995, "runs": 3,
           "spread": 0.01}  # fmt: skip
    with duckdb.connect(str(store_path)) as con:
        upgrade(con, LAWS_STEP - 1)
    with Store(store_path) as store:
        assert store.forecasts.law("p") is None
        store.forecasts.put_law("p", T0 + 5, T0, law)
        store.forecasts.put_law("p", T0 + 9, T0 + 8, {**law, "runs": 4})
        store.forecasts.put_law("q", T0 + 9, T0 + 7, law)
    with Store(store_path) as store:
        kept = store.forecasts.law("p")
        assert kept is not None and (kept.made_at, kept.newest_end) == (T0 + 9, T0 + 8)
        assert kept.data == {**law, "runs": 4}
        other = store.forecasts.law("q")
        assert other is not None and other.data == law
        assert SCHEMA_VERSION >= LAWS_STEP
