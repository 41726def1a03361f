"""The forecast kept of each run: one row per run, replaced by each new forecast the collector
makes of it, so the runs list reads a forecast rather than computing one, and a restarted
collector has them before its first pass. Beside them, the loss law of each project's
finished runs, one row a project, refitted when a run of it ends."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import duckdb

__all__ = ["Forecasts", "StoredForecast", "StoredLaw"]

Txn = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]

#: The figures kept in columns of their own (the runs list reads them); the whole answer is
#: kept beside them as JSON.
FIGURES = (
    "eta_s",
    "eta_s_p10",
    "eta_s_p90",
    "final_loss_p10",
    "final_loss_p50",
    "final_loss_p90",
    "success_probability",
)
#: Step 6 of the schema.
DDL = f"""CREATE TABLE forecasts (
    run VARCHAR PRIMARY KEY, made_at DOUBLE NOT NULL, data_ts DOUBLE NOT NULL, at_step BIGINT,
    planned_total_steps BIGINT, {", ".join(f"{f} DOUBLE" for f in FIGURES)},
    data VARCHAR NOT NULL)"""
#: Step 7 of the schema.
LAWS_DDL = """CREATE TABLE project_laws (
    project VARCHAR PRIMARY KEY, made_at DOUBLE NOT NULL, newest_end DOUBLE NOT NULL,
    data VARCHAR NOT NULL)"""
_COLUMNS = f"run, made_at, data_ts, at_step, planned_total_steps, {', '.join(FIGURES)}, data"


@dataclass(frozen=True, slots=True)
class StoredForecast:
    """A run's forecast as kept: made at wall time ``made_at`` from its data up to data time
    ``data_ts`` (its loss's newest sample then); None where the forecast had no figure."""

    run: str
    made_at: float
    data_ts: float
    at_step: int | None
    planned_total_steps: int | None
    eta_s: float | None
    eta_s_p10: float | None
    eta_s_p90: float | None
    final_loss_p10: float | None
    final_loss_p50: float | None
    final_loss_p90: float | None
    success_probability: float | None
    #: The whole answer of the forecast (schedule, basis...), as ``forecast_run`` gave it.
    data: dict[str, Any]

    @classmethod
    def of(cls, row: Sequence[Any]) -> StoredForecast:
        run, made_at, data_ts, at_step, planned, *figures, data = row
        eta, eta_p10, eta_p90, loss_p10, loss_p50, loss_p90, success = figures
        return cls(
            run, made_at, data_ts, at_step, planned, eta, eta_p10, eta_p90,
            loss_p10, loss_p50, loss_p90, success, json.loads(data),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class StoredLaw:
    """A project's loss law as kept: fitted at wall time ``made_at`` on its finished runs, the
    newest of which ended at ``newest_end``; ``data``: the law's numbers (``ProjectLaw``'s)."""

    project: str
    made_at: float
    newest_end: float
    data: dict[str, Any]


def _figure(answer: Mapping[str, Any], name: str) -> float | None:
    value = answer.get(name)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def of_runs(cur: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> dict[str, StoredForecast]:
    """The forecasts kept of ``runs`` (those that have one)."""
    rows = cur.execute(
        f"SELECT {_COLUMNS} FROM forecasts WHERE list_contains(?::VARCHAR[], run)", [list(runs)]
    ).fetchall()
    return {str(row[0]): StoredForecast.of(row) for row in rows}


class Forecasts:
    """The forecasts table: written under the store's writer ``lock`` (a row at a time, so a
    write never holds ingest back for long), read in transactions of their own."""

    def __init__(self, lock: threading.RLock, txn: Txn) -> None:
        self._lock, self._txn = lock, txn

    def put(self, run: str, made_at: float, data_ts: float, answer: Mapping[str, Any]) -> None:
        """Keep ``answer`` (``forecast_run``'s fields) as the run's forecast, replacing any."""
        at_step, planned = answer.get("at_step"), answer.get("planned_total_steps")
        row = [
            run,
            float(made_at),
            float(data_ts),
            None if at_step is None else int(at_step),
            None if planned is None else int(planned),
            *(_figure(answer, f) for f in FIGURES),
            json.dumps(dict(answer), sort_keys=True, default=float),  # numpy figures too
        ]
        marks = ", ".join("?" * len(row))
        with self._lock, self._txn() as cur:
            cur.execute(f"INSERT OR REPLACE INTO forecasts ({_COLUMNS}) VALUES ({marks})", row)

    def get(self, run: str) -> StoredForecast | None:
        """The run's forecast, or None when none was made."""
        with self._txn() as cur:
            return of_runs(cur, [run]).get(run)

    def of_runs(self, runs: Sequence[str]) -> dict[str, StoredForecast]:
        """The forecasts kept of ``runs`` (those that have one)."""
        with self._txn() as cur:
            return of_runs(cur, runs)

    def put_law(
        self, project: str, made_at: float, newest_end: float, law: Mapping[str, Any]
    ) -> None:
        """Keep ``law`` as the project's, replacing any."""
        row = [project, float(made_at), float(newest_end), json.dumps(dict(law), sort_keys=True)]
        with self._lock, self._txn() as cur:
            cur.execute("INSERT OR REPLACE INTO project_laws VALUES (?, ?, ?, ?)", row)

    def law(self, project: str) -> StoredLaw | None:
        """The project's law, or None when none was fitted."""
        with self._txn() as cur:
            row = cur.execute(
                "SELECT project, made_at, newest_end, data FROM project_laws WHERE project = ?",
                [project],
            ).fetchone()
        return None if row is None else StoredLaw(row[0], row[1], row[2], json.loads(row[3]))
