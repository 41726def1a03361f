"""A run's forecast: when it will reach its planned last step and where its loss will land,
from its loss and learning-rate series, its plan and its stated schedule."""

from __future__ import annotations

from fastapi import APIRouter

from ..model import NO_STEP
from ..predict import Series, forecast_run
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


def forecast_router(scope: Scope) -> APIRouter:
    """``GET /api/v1/runs/{run_id}/forecast`` over ``scope``'s store."""
    router = APIRouter(prefix="/api/v1/runs")

    def forecast(who: Reader, run_id: str) -> JSON:
        """ETA and final loss with their p10-p90 (null where too little is known yet)."""
        run = scope.run(who, run_id)
        loss = _series(scope.store, "train.loss", run.id)
        lr = _series(scope.store, "train.lr", run.id)
        answer = forecast_run(loss, lr, run.planned_total_steps, run.config)
        return JSON(clean({"run": run.id, **answer}))

    router.add_api_route("/{run_id}/forecast", forecast, methods=["GET"])
    return router
