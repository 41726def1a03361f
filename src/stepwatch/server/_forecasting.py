"""Forecasts made beside detection: every so often, each running run that logged new steps
since its last forecast is forecast again (``stepwatch.predict.forecast_run``) and the answer
kept in the store, where the runs list and `stepwatch top` read it.

Ingest comes first. The worker runs on a thread of its own at the lowest CPU priority, and the
forecasts' arithmetic in a process of its own at that priority too (in the collector's process
it would hold the interpreter's lock that ingest needs, whatever its priority). It reads a
bounded part of each series (``Bounds``: its span in buckets, its last steps whole), so a
run costs the same at any length of history; a pass forecasts at most ``max_runs`` runs, the
stalest first, and starts none after half its interval; a pass is skipped while the store's
writer is behind. The forecasts persist in the store: a restarted collector shows the last
ones until its first pass makes new ones.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from .._periodic import Periodic
from ..model import Run, RunStatus
from ..predict import FinishedCurve, ProjectLaw, fit_project_law, forecast_run
from ..store import SeriesInfo, Store, StoredForecast
from ._project_laws import refit_law
from ._run_series import DEFAULT_BOUNDS, Bounds, alert_kinds, bounded_series, pick_series

__all__ = ["DEFAULT_FORECAST_INTERVAL_S", "ForecastWorker", "forecast_bounded"]

log = logging.getLogger("stepwatch.server")

#: Seconds between passes, by default.
DEFAULT_FORECAST_INTERVAL_S = 30.0
#: Runs forecast in one pass at most; the others wait for the next (the stalest go first).
MAX_RUNS_PER_PASS = 100
#: A pass starts no new forecast once it has taken this share of its interval.
PASS_SHARE = 0.5
#: The niceness of the worker's thread (Linux: each thread has its own): the lowest priority.
NICENESS = 19


def _newest(store: Store, chosen: SeriesInfo) -> float | None:
    """The time of the newest sample of a series (tier rows and the tail: no scan)."""
    found = store.latest_of([chosen])
    return float(found[0][1]) if found else None


def forecast_bounded(
    store: Store,
    run: Run,
    loss: SeriesInfo,
    end: float,
    bounds: Bounds = DEFAULT_BOUNDS,
    compute: Callable[..., dict[str, Any]] = forecast_run,
    prior: ProjectLaw | None = None,
) -> dict[str, Any]:
    """``forecast_run``'s answer (made by ``compute``) for ``run`` from its ``loss`` series and
    its rate up to data time ``end``, each read within ``bounds``, its alerts so far and its
    project's law (``prior``)."""
    lr = pick_series(store, "train.lr", {"run": run.id})
    return compute(
        bounded_series(store, loss, run.start, end, bounds),
        None if lr is None else bounded_series(store, lr, run.start, end, bounds),
        run.planned_total_steps,
        run.config,
        alerts=alert_kinds(store, run.id),
        prior=prior,
    )


class _Arithmetic:
    """Forecasts and laws (``forecast_run``, ``fit_project_law``) made in a process of its own
    at the lowest priority, started on first use (spawned: the collector's threads and open
    store are not forked)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """``forecast_run``'s answer."""
        return self._pool_of().submit(forecast_run, *args, **kwargs).result()

    def fit(self, curves: list[FinishedCurve]) -> ProjectLaw | None:
        """``fit_project_law``'s answer."""
        return self._pool_of().submit(fit_project_law, curves).result()

    def _pool_of(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                1, multiprocessing.get_context("spawn"), initializer=os.nice, initargs=(NICENESS,)
            )
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)


class ForecastWorker:
    """A thread that, every ``interval_s``, forecasts the running runs of ``store`` that logged
    new steps since their last forecast, and keeps each forecast in ``store.forecasts``.

    Args:
        store: the collector's store.
        interval_s: seconds between passes.
        behind: True while ingest is behind (the writer's queue is long): the pass is skipped.
        bounds: how much of each series a forecast reads.
        max_runs: runs forecast in one pass at most.
        clock: wall time, to date the forecasts.
    """

    def __init__(
        self,
        store: Store,
        interval_s: float = DEFAULT_FORECAST_INTERVAL_S,
        *,
        behind: Callable[[], bool] = lambda: False,
        bounds: Bounds = DEFAULT_BOUNDS,
        max_runs: int = MAX_RUNS_PER_PASS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store, self._behind, self._bounds = store, behind, bounds
        self._max_runs, self._clock = max_runs, clock
        self._niced: int | None = None  # the thread given the lowest priority
        self._arithmetic = _Arithmetic()
        self._worker = Periodic(
            self._pass,
            interval_s,
            name="stepwatch-forecast",
            failed=f"forecasting failed; trying again in {interval_s:g} s",
            log=log,
        )

    def start(self) -> ForecastWorker:
        self._worker.start()
        return self

    def stop(self) -> None:
        """End the thread after the forecast under way, if any, and the forecasts' process."""
        self._worker.stop()
        self._arithmetic.close()

    def _pass(self) -> None:
        """A pass on the worker's thread, at the lowest priority."""
        self._lower_priority()
        self.tick()

    def tick(self) -> int:
        """One pass; the number of runs forecast."""
        if self._behind():
            log.debug("ingest is behind: forecasts wait for the next pass")
            return 0
        began = time.monotonic()
        budget = self._worker.interval_s * PASS_SHARE
        done = 0
        laws: dict[str, ProjectLaw | None] = {}
        for run, kept in self._due()[: self._max_runs]:
            if self._worker.stopping or time.monotonic() - began > budget:
                break
            done += self._forecast(run, kept, laws)
        return done

    def _due(self) -> list[tuple[Run, StoredForecast | None]]:
        """The running runs with a plan and their kept forecasts: those never forecast first,
        then the stalest forecast first."""
        running = [
            r for r in self._store.list_runs(status=RunStatus.RUNNING) if r.planned_total_steps
        ]
        kept = self._store.forecasts.of_runs([r.id for r in running])
        due = [(r, kept.get(r.id)) for r in running]
        return sorted(due, key=lambda d: -1.0 if d[1] is None else d[1].made_at)

    def _forecast(
        self, run: Run, kept: StoredForecast | None, laws: dict[str, ProjectLaw | None]
    ) -> int:
        """Forecast ``run`` if it logged new loss samples since ``kept`` was made; 1 if so.
        ``laws``: the projects' laws this pass, each refitted if due at its first run."""
        loss = pick_series(self._store, "train.loss", {"run": run.id})
        newest = None if loss is None else _newest(self._store, loss)
        if loss is None or newest is None or (kept is not None and kept.data_ts >= newest):
            return 0
        if run.project not in laws:
            laws[run.project] = refit_law(
                self._store, run.project, self._bounds, self._clock(), self._arithmetic.fit
            )
        answer = forecast_bounded(
            self._store, run, loss, newest, self._bounds, self._arithmetic, laws[run.project]
        )
        self._store.forecasts.put(run.id, self._clock(), newest, answer)
        return 1

    def _lower_priority(self) -> None:
        """Give the thread the lowest CPU priority, once (Linux sets it per thread)."""
        thread = threading.get_native_id()
        if self._niced == thread or sys.platform != "linux":
            return
        self._niced = thread
        try:
            os.setpriority(os.PRIO_PROCESS, thread, NICENESS)
        except OSError as exc:
            log.debug("forecasting runs at normal priority: %s", exc)
