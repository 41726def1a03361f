"""One line per run for the runs list: progress, pace, ETA, latest loss and throughput, alerts,
samples its producers dropped.

Everything comes from the newest sample of each series (tier rows plus the
uncompacted tail), one short window of raw samples for the step rate, and the
open alerts of the alert table; never a scan of a run's whole history.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb

from ..model import DROPPED_SAMPLES, NO_STEP, Run, RunStatus
from . import _alert_state, _query
from ._catalogue import Catalogue

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


def summaries(
    cur: duckdb.DuckDBPyConnection, cat: Catalogue, runs: list[Run], watermark: int
) -> list[RunSummary]:
    """A summary per run, in the order given."""
    ids = [r.id for r in runs]
    latest = _latest(cur, cat, set(ids), watermark)
    rates = _rates(cur, latest)
    alerts = _alert_state.open_counts(cur, ids) if ids else {}
    out = []
    for run in runs:
        acc = latest[run.id]
        values = acc.values or {}
        rate = rates.get(run.id)
        eta = None
        if (
            rate
            and run.status == RunStatus.RUNNING
            and run.planned_total_steps
            and acc.step is not None
        ):
            eta = max(0.0, (run.planned_total_steps - 1 - acc.step) / rate)
        out.append(
            RunSummary(
                run,
                acc.last_ts,
                acc.step,
                rate,
                eta,
                _finite(values["train.loss"][2]) if "train.loss" in values else None,
                _finite(values["train.tokens_per_s"][2])
                if "train.tokens_per_s" in values
                else None,
                alerts.get(run.id, 0),
                int(acc.dropped),
            )
        )
    return out
