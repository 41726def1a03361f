"""A run's forecast: when it will reach its planned last step and where its loss will land,
from its loss and learning-rate series, its plan and its stated schedule; and where its wall
time went so far."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter

from ..model import Run
from ..predict import Series, forecast_run, goodput
from ..store import SeriesInfo, Store
from ._auth import Reader
from ._jsonio import JSON, clean
from ._project_laws import kept_law
from ._run_series import alert_kinds, lowest_rank, read_whole, whole_series
from ._scope import Scope

__all__ = ["forecast_router"]


def _evaluations(store: Store, run: str) -> np.ndarray | None:
    """The steps at which the run logged an evaluation (any ``eval.*`` series)."""
    evals = [i for i in store.series(None, {"run": run}) if i.key.name.startswith("eval.")]
    return np.concatenate([store.raw(i.id)["step"] for i in evals]) if evals else None


def _goodput(
    store: Store, start: float, pace: Series, match: dict[str, str], evals: np.ndarray | None
) -> dict[str, float] | None:
    """The split of the wall time since ``start``, from the steps' times in ``pace`` and what
    the series ``match`` picks logged of data wait and checkpoint writes."""
    wait = whole_series(store, "train.data_time_s", match)
    written = whole_series(store, "ckpt.write_s", match)
    found = goodput(
        start,
        pace.step,
        pace.ts,
        data_wait=None if wait is None else (wait.step, wait.value),
        evaluations=evals,
        checkpoints=None if written is None else (written.step, written.value),
    )
    return None if found is None else found.as_dict()


def _by_node(store: Store, run: Run, evals: np.ndarray | None) -> dict[str, Any]:
    """Goodput per node, each from the step times of its lowest rank."""
    nodes: dict[str, list[SeriesInfo]] = {}
    for info in store.series("train.step_time_s", {"run": run.id}):
        if (node := info.key.label("node")) is not None:
            nodes.setdefault(node, []).append(info)
    out = {}
    for node, found in sorted(nodes.items()):
        chosen = lowest_rank(found)
        assert chosen is not None  # every node listed has a series
        pace, match = read_whole(store, chosen), {"run": run.id, "node": node}
        if spent := _goodput(store, run.start, pace, match, evals):
            out[node] = spent
    return out


def forecast_router(scope: Scope) -> APIRouter:
    """``GET /api/v1/runs/{run_id}/forecast`` over ``scope``'s store."""
    router = APIRouter(prefix="/api/v1/runs")

    def forecast(who: Reader, run_id: str) -> JSON:
        """ETA and final loss with their p10-p90 (null where too little is known yet), and
        where the run's wall time went (goodput and badput), for the run and per node."""
        run = scope.run(who, run_id)
        store, of_run = scope.store, {"run": run.id}
        loss = whole_series(store, "train.loss", of_run)
        lr = whole_series(store, "train.lr", of_run)
        kinds = alert_kinds(store, run.id)
        answer = forecast_run(
            loss, lr, run.planned_total_steps, run.config, alerts=kinds,
            prior=kept_law(scope.store, run.project),
        )  # fmt: skip
        evals = _evaluations(store, run.id)
        spent = None if loss is None else _goodput(store, run.start, loss, of_run, evals)
        by_node = _by_node(store, run, evals)
        return JSON(clean({"run": run.id, **answer, "goodput": spent, "goodput_by_node": by_node}))

    router.add_api_route("/{run_id}/forecast", forecast, methods=["GET"])
    return router
