"""A run's advice, with the numbers behind each item, from bounded reads of its data: the
recent steps' timings and host CPU, its GPUs' memory and utilisation and its steps
downsampled over the run, its recent checkpoints and its latest alerts."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from fastapi import APIRouter

from ..model import Run
from ..predict import (
    FATAL_KINDS,
    RunFacts,
    advise,
    count_failures,
    count_restarts,
    idle_gpu_seconds,
)
from ..store import SeriesInfo, Store
from ._auth import Reader
from ._jsonio import JSON, clean
from ._run_series import downsample_one, pick_series, run_alerts
from ._scope import Scope

__all__ = ["advice_router"]

#: Step timings and host CPU are read over the latest half hour: the advice is about now.
RECENT_S = 1800.0
#: At most this many samples of a timing series (its oldest in the window when more).
RECENT_SAMPLES = 5000
#: Buckets of the host CPU over the recent window.
RECENT_POINTS = 60
#: Buckets over the whole run of each GPU's memory and utilisation.
GPU_POINTS = 240
#: Buckets over the whole run of the lowest rank's steps (restarts and the first step).
STEP_POINTS = 2000
#: Checkpoint writes are read over the latest week, at most this many.
CKPT_WINDOW_S = 7 * 86400.0
CKPT_SAMPLES = 1000
#: Alert kinds that say the GPU memory ran out or nearly did.
OOM_KINDS = frozenset({"log_oom", "gpu_memory_pressure"})
#: Alert kinds that say the network between nodes is slow or failing.
NETWORK_KINDS = frozenset({"sync_latency", "log_nccl"})


def _recent_median(store: Store, info: SeriesInfo | None, end: float) -> float | None:
    """The median of the finite values of the series' latest ``RECENT_S``, or None."""
    if info is None:
        return None
    values = store.raw(info.id, end - RECENT_S, end, RECENT_SAMPLES)["value"]
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else None


def _gpu(info: SeriesInfo) -> tuple[str, str]:
    return info.key.label("node") or "", info.key.label("gpu") or ""


def _host_cpu(store: Store, run: str, node: str | None, end: float) -> float | None:
    """The host CPU (median of the recent buckets) of ``node``, else of the busiest node."""
    got = store.downsample_many(
        "host.cpu_pct", {"run": run}, end - RECENT_S, end, RECENT_POINTS, ("last",)
    )
    medians = {i.key.label("node"): float(np.nanmedian(d["last"])) for i, d in got}
    if node in medians:
        return medians[node]
    return max(medians.values()) if medians else None


def _checkpoints(store: Store, run: str, end: float) -> tuple[float | None, float | None]:
    """The median checkpoint write and the median time between checkpoints, recently."""
    info = pick_series(store, "ckpt.write_s", {"run": run})
    if info is None:
        return None, None
    data = store.raw(info.id, end - CKPT_WINDOW_S, end, CKPT_SAMPLES)
    written = data["value"][np.isfinite(data["value"]) & (data["value"] > 0)]
    gaps = np.diff(np.sort(data["ts"]))
    return (float(np.median(written)) if len(written) else None,
            float(np.median(gaps)) if len(gaps) else None)  # fmt: skip


def _steps(store: Store, pace: SeriesInfo, start: float, end: float) -> tuple[float | None, int]:
    """When the first step ended (the start of its bucket) and how often the step went back."""
    data = downsample_one(store, pace, start, end, STEP_POINTS, ("step",))
    if data is not None and len(stepped := data["ts"][data["step"] >= 0]):
        return float(stepped[0]), count_restarts(data["step"])
    return None, 0


@dataclass(frozen=True, slots=True)
class _Gpus:
    """What the GPUs' buckets say: how many, the fullest's peak share, idle GPU-seconds."""

    count: int
    mem_peak: float | None
    startup_idle_s: float
    training_idle_s: float
    idle_now: int


def _gpus(store: Store, run: str, start: float, end: float, first_step: float | None) -> _Gpus:
    """Each GPU's memory peak and idle buckets over the run."""
    names = ("gpu.mem_used_bytes", "gpu.mem_total_bytes", "gpu.util_pct")
    got: dict[str, dict[tuple[str, str], dict[str, np.ndarray]]] = {n: {} for n in names}
    for info, data in store.downsample_many(names, {"run": run}, start, end, GPU_POINTS, ("max",)):
        got[info.key.name][_gpu(info)] = data
    used, total, util = (got[n] for n in names)
    peaks = [np.nanmax(used[g]["max"]) / top for g in used
             if g in total and (top := np.nanmax(total[g]["max"])) > 0]  # fmt: skip
    buckets = [(d["ts"], d["max"]) for d in util.values()]
    before, after, now = idle_gpu_seconds(buckets, (end - start) / GPU_POINTS, first_step)
    return _Gpus(len({*used, *util}), float(max(peaks)) if peaks else None, before, after, now)


def _facts(store: Store, run: Run) -> RunFacts:
    """What the advice reads, measured; every read is bounded whatever the run's length."""
    of_run = {"run": run.id}
    newest = [ts for _, ts, _, _ in store.latest(None, of_run)]
    end = run.end if run.end is not None else max(newest, default=run.start)
    start = min(run.start, end)
    timed = pick_series(store, "train.step_time_s", of_run)
    pace = timed or pick_series(store, "train.loss", of_run)
    first_step, restarts = (None, 0) if pace is None else _steps(store, pace, start, end)
    gpus = _gpus(store, run.id, start, end, first_step)
    alerts = run_alerts(store, run.id)
    failed = [a.since if a.since is not None else a.ts for a in alerts if a.kind in FATAL_KINDS]
    write_s, interval_s = _checkpoints(store, run.id, end)
    node = None if pace is None else pace.key.label("node")
    return RunFacts(
        wall_s=end - start,
        gpus=gpus.count or len(store.series("train.step_time_s", of_run)) or 1,
        config=run.config,
        step_s=_recent_median(store, timed, end),
        data_wait_s=_recent_median(store, pick_series(store, "train.data_time_s", of_run), end),
        comm_s=_recent_median(store, pick_series(store, "train.comm_time_s", of_run), end),
        host_cpu_pct=_host_cpu(store, run.id, node, end),
        gpu_mem_peak=gpus.mem_peak,
        oom_alerts=sum(a.kind in OOM_KINDS for a in alerts),
        network_alerts=sum(a.kind in NETWORK_KINDS for a in alerts),
        failures=count_failures(restarts, failed),
        ckpt_write_s=write_s,
        ckpt_interval_s=interval_s,
        startup_idle_gpu_s=gpus.startup_idle_s,
        training_idle_gpu_s=gpus.training_idle_s,
        idle_gpus_now=gpus.idle_now,
    )


def advice_router(scope: Scope) -> APIRouter:
    """``GET /api/v1/runs/{run_id}/advice`` over ``scope``'s store."""
    router = APIRouter(prefix="/api/v1/runs")

    def advice(who: Reader, run_id: str) -> JSON:
        """Changes of settings the run's data supports (none on a healthy run), each with the
        measurements behind it, and the figures they were drawn from."""
        run = scope.run(who, run_id)
        facts = _facts(scope.store, run)
        measured = {k: v for k, v in asdict(facts).items() if k != "config"}
        items = [a.as_dict() for a in advise(facts)]
        return JSON(clean({"run": run.id, "measured": measured, "advice": items}))

    router.add_api_route("/{run_id}/advice", advice, methods=["GET"])
    return router
