"""One line per run for the runs list: progress, pace, ETA, latest loss and throughput, alerts,
samples its producers dropped, and what the run's forecast says of its end.

Everything comes from the newest sample of each series (tier rows plus the
uncompacted tail), one short window of raw samples for the step rate, the
open alerts of the alert table and the forecast kept of the run; never a scan
of a run's whole history.

The ETA is the kept forecast's (pauses to come included), less the data time since it was
made, while it is current: made for the run's plan, at a step the run has reached. Otherwise
it is the naive one: the steps left at the recent pace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb

from ..model import DROPPED_SAMPLES, NO_STEP, Run, RunStatus
from . import _alert_state, _forecasts, _query
from ._catalogue import Catalogue
from ._forecasts import StoredForecast

#: The step rate is measured over this much of the newest data.
RATE_WINDOW_S = 300.0


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What the runs list shows of one run; None where the run has no such data yet."""

    run: Run
    last_ts: float | None = None
    step: int | None = None
    steps_per_s: float | None = None
    eta_s: float | None = None
    loss: float | None = None
    tokens_per_s: float | None = None
    open_alerts: int = 0
    #: Samples the run's producers dropped because their spools were full (as they reported).
    dropped_samples: int = 0
    #: The ETA's p10 and p90, from the run's current forecast (None without one).
    eta_s_p10: float | None = None
    eta_s_p90: float | None = None
    #: The final loss forecast (p10, p50, p90) and the chance the run ends well, from the
    #: run's current forecast.
    final_loss_p10: float | None = None
    final_loss_p50: float | None = None
    final_loss_p90: float | None = None
    success_probability: float | None = None

    @property
    def progress(self) -> float | None:
        """Fraction of the planned steps done (steps count from 0)."""
        planned = self.run.planned_total_steps
        if not planned or self.step is None:
            return None
        return min(1.0, (self.step + 1) / planned)


@dataclass(slots=True)
class _Latest:
    last_ts: float | None = None
    step: int | None = None
    pace_series: int | None = None
    values: dict[str, tuple[float, int, float]] | None = None  # name -> (ts, -id, value)
    dropped: float = 0.0  # the newest count of each producer's dropped-samples series, summed


def _latest(
    cur: duckdb.DuckDBPyConnection, cat: Catalogue, run_ids: set[str], watermark: int
) -> dict[str, _Latest]:
    """Per run: newest ts, highest step (and the series that reached it), newest loss/tokens."""
    found = cat.select(cur, None, {"run": frozenset(run_ids)})
    run_of = {i.id: str(i.key.label("run")) for i in found}
    name_of = {i.id: i.key.name for i in found}
    ids = list(run_of)
    out = {r: _Latest(values={}) for r in run_ids}
    for sid, ts, step, value in _query.latest(cur, ids, watermark):
        acc = out[run_of[sid]]
        assert acc.values is not None
        acc.last_ts = ts if acc.last_ts is None else max(acc.last_ts, ts)
        if step != NO_STEP and (acc.step is None or step > acc.step):
            acc.step, acc.pace_series = step, sid
        name = name_of[sid]
        if name == DROPPED_SAMPLES and math.isfinite(value):
            acc.dropped += value
        if name in ("train.loss", "train.tokens_per_s"):
            mine = (ts, -sid, value)
            if name not in acc.values or mine > acc.values[name]:
                acc.values[name] = mine
    return out


def _rates(cur: duckdb.DuckDBPyConnection, latest: dict[str, _Latest]) -> dict[str, float]:
    """Steps per second of each run over its newest RATE_WINDOW_S, from its pace series.

    One query per run, so each reads only its own recent row groups (an old run's window
    would otherwise widen the scan of every other run).
    """
    out = {}
    for run, acc in latest.items():
        if acc.pace_series is None or acc.last_ts is None:
            continue
        ((t0, t1, s0, s1),) = cur.execute(
            """SELECT min(ts), max(ts), arg_min(step, ts), arg_max(step, ts) FROM samples
            WHERE series = ? AND ts >= ? AND step IS NOT NULL""",
            [acc.pace_series, acc.last_ts - RATE_WINDOW_S],
        ).fetchall()
        if t0 is not None and t1 > t0 and s1 > s0:
            out[run] = (s1 - s0) / (t1 - t0)
    return out


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def _naive_eta(run: Run, acc: _Latest, rate: float | None) -> float | None:
    """Steps left at the recent pace, while the run is running."""
    if not rate or run.status != RunStatus.RUNNING or not run.planned_total_steps:
        return None
    if acc.step is None:
        return None
    return max(0.0, (run.planned_total_steps - 1 - acc.step) / rate)


def _current(run: Run, acc: _Latest, kept: StoredForecast | None) -> StoredForecast | None:
    """The kept forecast while it speaks for the run as it stands: running, the same plan, a
    step reached (a restart that went back makes it wait for the next forecast)."""
    if kept is None or run.status != RunStatus.RUNNING or kept.eta_s is None:
        return None
    if kept.planned_total_steps != run.planned_total_steps or kept.at_step is None:
        return None
    return kept if acc.step is not None and kept.at_step <= acc.step else None


def _forecast_fields(acc: _Latest, kept: StoredForecast) -> dict[str, float | None]:
    """The kept forecast's ETA (and interval) less the data time since it was made (the
    newest loss sample's), never below 0; its final loss and success probability."""
    values = acc.values or {}
    now = values["train.loss"][0] if "train.loss" in values else kept.data_ts
    elapsed = max(0.0, now - kept.data_ts)

    def left(eta: float | None) -> float | None:
        return None if eta is None else max(0.0, eta - elapsed)

    return {
        "eta_s": left(kept.eta_s),
        "eta_s_p10": left(kept.eta_s_p10),
        "eta_s_p90": left(kept.eta_s_p90),
        "final_loss_p10": kept.final_loss_p10,
        "final_loss_p50": kept.final_loss_p50,
        "final_loss_p90": kept.final_loss_p90,
        "success_probability": kept.success_probability,
    }


def summaries(
    cur: duckdb.DuckDBPyConnection, cat: Catalogue, runs: list[Run], watermark: int
) -> list[RunSummary]:
    """A summary per run, in the order given."""
    ids = [r.id for r in runs]
    latest = _latest(cur, cat, set(ids), watermark)
    rates = _rates(cur, latest)
    alerts = _alert_state.open_counts(cur, ids) if ids else {}
    kept = _forecasts.of_runs(cur, ids) if ids else {}
    out = []
    for run in runs:
        acc = latest[run.id]
        values = acc.values or {}
        rate = rates.get(run.id)
        current = _current(run, acc, kept.get(run.id))
        forecast = {"eta_s": _naive_eta(run, acc, rate)}
        if current is not None:
            forecast = _forecast_fields(acc, current)
        out.append(
            RunSummary(
                run,
                acc.last_ts,
                acc.step,
                rate,
                loss=_finite(values["train.loss"][2]) if "train.loss" in values else None,
                tokens_per_s=_finite(values["train.tokens_per_s"][2])
                if "train.tokens_per_s" in values
                else None,
                open_alerts=alerts.get(run.id, 0),
                dropped_samples=int(acc.dropped),
                **forecast,
            )
        )
    return out
