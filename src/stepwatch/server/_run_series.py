"""A run's data as forecasts read it: which of a metric's series speaks for the run (rank
0's), read whole (the forecast route) or bounded (the forecasting worker, whose cost must not
grow with the run's history); and the kinds of the alerts it raised."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model import NO_STEP
from ..predict import Series, rank_order
from ..store import AlertQuery, AlertRow, SeriesInfo, Store

__all__ = [
    "DEFAULT_BOUNDS",
    "MAX_ALERTS",
    "Bounds",
    "alert_kinds",
    "bounded_series",
    "downsample_one",
    "lowest_rank",
    "pick_series",
    "read_whole",
    "run_alerts",
    "whole_series",
]

#: A run's alerts a forecast reads at most, the newest first (through the run's index).
MAX_ALERTS = 1_000


def pick_series(store: Store, name: str, match: dict[str, str]) -> SeriesInfo | None:
    """The series of ``name`` with these labels that speaks for them: rank 0's, or the
    lowest rank's when ranks each send one; None when there is none."""
    return lowest_rank(store.series(name, match))


def lowest_rank(found: Sequence[SeriesInfo]) -> SeriesInfo | None:
    """Of these series, the one that speaks for them all (see ``pick_series``)."""
    return min(found, key=lambda i: (rank_order(i.key.label("rank")), i.id)) if found else None


def run_alerts(store: Store, run: str) -> list[AlertRow]:
    """The run's alerts so far, the latest-changed ``MAX_ALERTS`` (through the run's index)."""
    return store.current.alerts(AlertQuery(state="all", run=run), limit=MAX_ALERTS).items


def alert_kinds(store: Store, run: str) -> list[str]:
    """The kinds of the run's alerts so far, one per alert (``run_alerts``)."""
    return [a.kind for a in run_alerts(store, run)]


def downsample_one(
    store: Store, chosen: SeriesInfo, start: float, end: float, points: int, fields: Sequence[str]
) -> dict[str, np.ndarray] | None:
    """``Store.downsample_many``'s buckets (``fields``, "step" among them if asked) of this one
    series over [``start``, ``end``], or None when it has no samples there."""
    labels = dict(chosen.key.labels)
    got = store.downsample_many(chosen.key.name, labels, start, end, points, fields)
    return next((data for info, data in got if info.id == chosen.id), None)


def _stepped(data: dict[str, np.ndarray]) -> Series:
    stepped = data["step"] != NO_STEP
    return Series(data["step"][stepped], data["ts"][stepped], data["value"][stepped])


def whole_series(store: Store, name: str, match: dict[str, str]) -> Series | None:
    """Every sample with a step of the series ``pick_series`` picks, or None."""
    chosen = pick_series(store, name, match)
    return None if chosen is None else read_whole(store, chosen)


def read_whole(store: Store, chosen: SeriesInfo) -> Series:
    """Every sample with a step of this series."""
    return _stepped(store.raw(chosen.id))


@dataclass(frozen=True, slots=True)
class Bounds:
    """How much of a series a bounded read takes: its whole span in ``buckets`` buckets (each
    bucket's last sample), and every sample of about its last ``tail_steps`` steps."""

    buckets: int = 2_000
    tail_steps: int = 20_000


DEFAULT_BOUNDS = Bounds()


def bounded_series(
    store: Store, chosen: SeriesInfo, start: float, end: float, bounds: Bounds
) -> Series:
    """The samples with a step of ``chosen`` over [``start``, ``end``], read in bounded cost:
    every sample of the last ``bounds.tail_steps`` steps (and of the bucket they start in),
    and before them the last sample of each of up to ``bounds.buckets`` buckets.

    The samples before the tail come without their times (NaN): a bucket's last sample does
    not tell how long the steps before it took, so the ETA, which reads only steps whose time
    is known, paces the run from its tail alone; the loss law fits the whole span."""
    coarse = downsample_one(store, chosen, start, end, bounds.buckets, ("last", "step"))
    stepped = None if coarse is None else coarse["step"] != NO_STEP
    if coarse is None or stepped is None or not stepped.any():
        return Series(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    newest = int(coarse["step"][stepped].max())
    reached = np.flatnonzero(stepped & (coarse["step"] >= newest - bounds.tail_steps))
    cut = float(coarse["ts"][reached[0]]) if len(reached) else start
    tail = _stepped(store.raw(chosen.id, start=cut, end=end))
    before = stepped & (coarse["ts"] < cut)
    return Series(
        np.concatenate([coarse["step"][before], tail.step]),
        np.concatenate([np.full(int(before.sum()), np.nan), tail.ts]),
        np.concatenate([coarse["last"][before], tail.value]),
    )
