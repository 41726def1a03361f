"""The loss law of each project's finished runs, as forecasts take it: refitted by the
forecast worker when a run of the project has ended since the kept law was made, read by the
forecast route as kept. A law is fitted on the project's newest ``LAW_RUNS`` finished runs,
each read within bounds, so a refit costs the same after a thousand runs as after three."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model import Run, RunStatus
from ..predict import FinishedCurve, ProjectLaw, finished_curve, fit_project_law
from ..store import Store, StoredLaw
from ._run_series import Bounds, bounded_series, pick_series

__all__ = ["LAW_RUNS", "kept_law", "refit_law"]

#: The newest finished runs of a project its law is fitted on.
LAW_RUNS = 20

Fit = Callable[[list[FinishedCurve]], ProjectLaw | None]


def kept_law(store: Store, project: str) -> ProjectLaw | None:
    """The project's law as kept, or None when none was fitted."""
    return _law(store.forecasts.law(project))


def refit_law(
    store: Store, project: str, bounds: Bounds, made_at: float, fit: Fit = fit_project_law
) -> ProjectLaw | None:
    """The project's law, fitted again (by ``fit``) and kept when a run of it has ended since
    the kept one was made; the kept one otherwise."""
    ended = [
        r for r in store.list_runs(project, RunStatus.FINISHED, limit=LAW_RUNS)
        if r.planned_total_steps and r.end is not None
    ]  # fmt: skip
    newest = max((float(r.end) for r in ended if r.end is not None), default=None)
    kept = store.forecasts.law(project)
    if newest is None or (kept is not None and kept.newest_end >= newest):
        return _law(kept)
    curves = [c for c in (_curve(store, r, bounds) for r in ended) if c is not None]
    law = fit(curves)
    record: dict[str, Any] = {} if law is None else law.as_dict()  # {}: none, until a run ends
    store.forecasts.put_law(project, made_at, newest, record)
    return law


def _law(kept: StoredLaw | None) -> ProjectLaw | None:
    return None if kept is None or not kept.data else ProjectLaw.from_dict(kept.data)


def _curve(store: Store, run: Run, bounds: Bounds) -> FinishedCurve | None:
    loss = pick_series(store, "train.loss", {"run": run.id})
    if loss is None or run.end is None or not run.planned_total_steps:
        return None
    lr = pick_series(store, "train.lr", {"run": run.id})
    return finished_curve(
        bounded_series(store, loss, run.start, run.end, bounds),
        None if lr is None else bounded_series(store, lr, run.start, run.end, bounds),
        run.planned_total_steps,
        run.config,
    )
