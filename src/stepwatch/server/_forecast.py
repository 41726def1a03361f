"""A run's forecast: when it will reach its planned last step and where its loss will land,
from its loss and learning-rate series, its plan and its stated schedule; and where its wall
time went so far."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter

from ..model import NO_STEP, Run
from ..predict import Series, forecast_run, goodput
from ..store import SeriesInfo, Store
from ._auth import Reader
from ._jsonio import JSON, clean
from ._scope import Scope

__all__ = ["forecast_router"]


def _series(store: Store, name: str, run: str) -> Series | None:
    """The run's series of ``name`` with steps (rank 0's, or the first, when ranks each send
    one), or None."""
    found = store.series(name, {"run": run})
    if not found:
        return None
    chosen: SeriesInfo = min(found, key=lambda i: (i.key.label("rank") not in (None, "0"), i.id))
    data = store.raw(chosen.id)
    stepped = data["step"] != NO_STEP
    return Series(data["step"][stepped], data["ts"][stepped], data["value"][stepped])


def _goodput(store: Store, run: Run, loss: Series | None) -> dict[str, float] | None:
    """The split of the run's wall time, from its steps' times and what it logged of its data
    wait, evaluations (any ``eval.*`` series) and checkpoint writes."""
    if loss is None:
        return None
    wait = _series(store, "train.data_time_s", run.id)
    written = _series(store, "ckpt.write_s", run.id)
    evals = [i for i in store.series(None, {"run": run.id}) if i.key.name.startswith("eval.")]
    at = [store.raw(i.id)["step"] for i in evals]
    found = goodput(
        run.start,
        loss.step,
        loss.ts,
        data_wait=None if wait is None else (wait.step, wait.value),
        evaluations=np.concatenate(at) if at else None,
        checkpoints=None if written is None else (written.step, written.value),
    )
    return None if found is None else found.as_dict()


def forecast_router(scope: Scope) -> APIRouter:
    """``GET /api/v1/runs/{run_id}/forecast`` over ``scope``'s store."""
    router = APIRouter(prefix="/api/v1/runs")

    def forecast(who: Reader, run_id: str) -> JSON:
        """ETA and final loss with their p10-p90 (null where too little is known yet), and
        where the run's wall time went (goodput and badput)."""
        run = scope.run(who, run_id)
        loss = _series(scope.store, "train.loss", run.id)
        lr = _series(scope.store, "train.lr", run.id)
        answer = forecast_run(loss, lr, run.planned_total_steps, run.config)
        spent = _goodput(scope.store, run, loss)
        return JSON(clean({"run": run.id, **answer, "goodput": spent}))

    router.add_api_route("/{run_id}/forecast", forecast, methods=["GET"])
    return router
