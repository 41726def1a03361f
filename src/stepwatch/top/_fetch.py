"""Build a Snapshot of one run from the collector's HTTP API, a handful of requests a frame."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import httpx

from .._tls import ClientTls
from ..client import ClientError, CollectorClient
from ..wire import parse_value
from ._alerts import alerts_from_api
from ._snapshot import AlertRow, Forecast, GpuRow, Snapshot, StepTimes

__all__ = ["TopClient", "TopError"]

#: Recent history behind the loss sparkline and the pace (steps per second).
RECENT_S = 120.0
#: Window of the step-time quantiles and phase medians.
STEP_WINDOW_S = 60.0
#: Loss values kept for the sparkline.
SPARK_POINTS = 20
_GPU_FIELDS = {
    "gpu.util_pct": "util_pct",
    "gpu.mem_used_bytes": "mem_used_bytes",
    "gpu.mem_total_bytes": "mem_total_bytes",
    "gpu.temp_c": "temp_c",
    "gpu.power_w": "power_w",
    "gpu.power_limit_w": "power_limit_w",
}
_PHASES = {
    "data_s": "train.data_time_s",
    "compute_s": "train.compute_time_s",
    "comm_s": "train.comm_time_s",
}


#: The error of the collector's client, under the name top's callers catch: the address, the
#: token or the run is for the person running `stepwatch top` to fix.
TopError = ClientError


def _value(raw: Any) -> float:
    return parse_value(raw, "a value the collector sent") if raw is not None else math.nan


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


class TopClient:
    """Reads one run's state from a collector; every OS boundary is an argument.

    Args:
        server: the collector's base URL.
        token: bearer token, when the collector requires one.
        tls: the CA to trust and the client certificate, for an ``https://`` server.
        transport: an httpx transport (tests and embedding); the network by default.
        clock: wall-clock seconds, to date snapshots.
    """

    def __init__(
        self,
        server: str,
        token: str | None = None,
        *,
        tls: ClientTls | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        timeout_s: float = 10.0,
    ) -> None:
        self._api = CollectorClient(
            server, token, tls=tls, transport=transport, timeout_s=timeout_s
        )
        self._server, self._clock = self._api.url, clock

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> TopClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pick_run(self) -> str:
        """The most recently started running run; the most recent run when none is running."""
        runs = self._api.runs()
        if not runs:
            raise TopError(f"{self._server} has no runs yet")
        running = [r for r in runs if r.get("status") == "running"] or runs
        return str(max(running, key=lambda r: r.get("start") or 0.0)["id"])

    def snapshot(self, run_id: str) -> Snapshot:
        """The run's state now: its record, its newest samples, recent history, open alerts,
        its ETA and forecast."""
        try:
            run = self._api.run(run_id)
        except ClientError as exc:
            if exc.status == 404:
                raise TopError(f"{self._server} has no run {run_id!r}") from None
            raise
        latest = self._api.latest(run_id)
        train = _newest_by_name(latest)
        last_ts = max((float(r["ts"]) for r in latest), default=None)
        steps_per_s, loss_recent = self._recent_loss(run_id, train.get("train.loss"))
        return Snapshot(
            run_id=run_id,
            name=str(run.get("name") or run_id),
            status=str(run.get("status") or ""),
            taken_at=self._clock(),
            planned_steps=run.get("planned_total_steps"),
            step=max((int(r["step"]) for r in train.values() if r["step"] >= 0), default=None),
            last_ts=last_ts,
            steps_per_s=steps_per_s,
            loss=_newest(train, "train.loss"),
            lr=_newest(train, "train.lr"),
            tokens_per_s=_newest(train, "train.tokens_per_s"),
            loss_recent=loss_recent,
            gpus=_gpus(latest),
            step_times=self._step_times(run_id, last_ts),
            alerts=self._alerts(run_id),
            forecast=self._forecast(run_id),
        )

    def _recent_loss(
        self, run_id: str, newest: dict[str, Any] | None
    ) -> tuple[float | None, tuple[float, ...]]:
        """Steps per second and the loss values over the newest RECENT_S of the loss series."""
        if newest is None:
            return None, ()
        labels = [f"{k}:{v}" for k, v in newest["labels"].items() if k != "run"]
        found = self._api.series("train.loss", run_id, labels)
        if not found:
            return None, ()
        start = float(newest["ts"]) - RECENT_S
        raw = self._api.raw(found[0]["id"], start)
        ts, steps = raw["ts"], raw["step"]
        values = [_value(v) for v in raw["value"]]
        every = max(1, math.ceil(len(values) / SPARK_POINTS))
        spark = tuple(values[::-1][::every][::-1])
        pace = None
        if len(ts) > 1 and ts[-1] > ts[0] and steps[-1] > steps[0]:
            pace = (steps[-1] - steps[0]) / (ts[-1] - ts[0])
        return pace, spark

    def _median(self, run_id: str, name: str, start: float, q: str) -> dict[str, float]:
        """Quantiles ``q`` of a metric across ranks since ``start`` (the fullest bucket's)."""
        groups = self._api.percentiles(name, run_id, start, q, points=1)
        buckets = [
            (count, {key: _value(col[i]) for key, col in g["q"].items()})
            for g in groups
            for i, count in enumerate(g["count"])
        ]
        return max(buckets, key=lambda b: b[0])[1] if buckets else {}

    def _step_times(self, run_id: str, last_ts: float | None) -> StepTimes:
        if last_ts is None:
            return StepTimes()
        start = last_ts - STEP_WINDOW_S
        step = self._median(run_id, "train.step_time_s", start, "0.5,0.99")
        phases = {
            field: _finite(self._median(run_id, name, start, "0.5").get("0.5"))
            for field, name in _PHASES.items()
        }
        return StepTimes(_finite(step.get("0.5")), _finite(step.get("0.99")), **phases)

    def _forecast(self, run_id: str) -> Forecast:
        """The ETA and the final loss as the runs list says them (the collector's forecast
        of the run, kept current beside detection)."""
        found = self._api.call("GET", "/runs/summary", params={"run": run_id})
        row = found[0] if found else {}
        return Forecast(**{f.name: _finite(row.get(f.name)) for f in fields(Forecast)})

    def _alerts(self, run_id: str) -> tuple[AlertRow, ...] | None:
        """Open alerts from the alerts API; None when the collector has none (404)."""
        try:
            return alerts_from_api(self._api.alerts(run=run_id, state="open"))
        except ClientError as exc:
            if exc.status == 404:
                return None
            raise


def _newest(train: dict[str, dict[str, Any]], name: str) -> float | None:
    """The newest finite value of a training metric; None when absent or not finite."""
    return _finite(_value(train[name]["value"])) if name in train else None


def _newest_by_name(latest: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The newest sample of each training metric, whichever rank logged it."""
    out: dict[str, dict[str, Any]] = {}
    for row in latest:
        name = row["name"]
        if name.startswith("train.") and (name not in out or row["ts"] > out[name]["ts"]):
            out[name] = row
    return out


def _gpus(latest: list[dict[str, Any]]) -> tuple[GpuRow, ...]:
    """One row per (node, gpu) that reported, ordered by node then GPU index."""
    fields: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for row in latest:
        attr, labels = _GPU_FIELDS.get(row["name"]), row["labels"]
        if attr is not None and "gpu" in labels:
            fields[(labels.get("node", ""), labels["gpu"])][attr] = _value(row["value"])
    order = sorted(fields, key=lambda k: (k[0], int(k[1]) if k[1].isdigit() else 0, k[1]))
    return tuple(GpuRow(node, gpu, **fields[(node, gpu)]) for node, gpu in order)
