"""Time order for the live engine: batches are committed in arrival order, detectors run in
data time.

Two guarantees, both column-wise:

- ``SeriesOrder``: each series' samples reach its detectors in time order. A
  series comes from one sender, so this only ever bites on a sender that
  re-sends old data; such a sample is not dropped: its time is raised to the
  latest time already processed for its series, so its value still counts.
  An exact copy of a sample already taken (same series, time and value, sent
  twice in a batch or again with a later one, up to ``COPY_HORIZON_S`` of data
  time back) is dropped: it must not count twice toward ``for: N samples`` or a
  window. A sample of the same time with another value is new, and kept.
- ``Reorder``: the rules that compare members (peers, absence) need every
  member's samples in one time order. Samples are held per run for a lateness
  window of data time and released sorted; a sample older than what its run
  already released is processed with the next release, its time raised to
  that run's release frontier (counted in ``late``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from ...model import SampleBatch, SeriesKey

__all__ = ["Reorder", "ReorderBuffer", "SeriesOrder", "merge"]

_NO_RUN = ""
#: How far back in data time a sample is still recognised as a copy of one already taken: a
#: re-sent batch follows its first send within seconds, and a longer memory costs memory.
COPY_HORIZON_S = 10.0


def merge(batches: Sequence[SampleBatch]) -> SampleBatch:
    """Several batches as one, each series' samples in their order of arrival."""
    if len(batches) == 1:
        return batches[0]
    index: dict[SeriesKey, int] = {}
    series = []
    for batch in batches:
        ids = np.array([index.setdefault(k, len(index)) for k in batch.keys], np.uint32)
        series.append(ids[batch.series] if len(batch) else np.empty(0, np.uint32))
    return SampleBatch(
        "merged",
        0,
        list(index),
        np.concatenate(series) if series else np.empty(0, np.uint32),
        np.concatenate([b.ts for b in batches]) if batches else np.empty(0),
        np.concatenate([b.step for b in batches]) if batches else np.empty(0, np.int64),
        np.concatenate([b.value for b in batches]) if batches else np.empty(0),
        [e for b in batches for e in b.events],
    )


class SeriesOrder:
    """Raises a sample's time to its series' latest processed time when it would go back, and
    drops exact copies of samples already taken."""

    def __init__(self, horizon_s: float = COPY_HORIZON_S) -> None:
        self.horizon_s = horizon_s
        self._last: dict[SeriesKey, float] = {}
        self._ids: dict[SeriesKey, int] = {}
        self._next_id = 0  # never reused: ``_taken`` may still hold a forgotten series' samples
        self._taken: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
        self.late = 0
        self.copies = 0

    def __call__(self, batch: SampleBatch) -> SampleBatch:
        """The batch with every series non-decreasing in time, from the previous batches on."""
        n = len(batch)
        if not n:
            return batch
        order = np.argsort(batch.series, kind="stable")
        series, ts = batch.series[order], batch.ts[order]
        starts = np.flatnonzero(np.r_[True, series[1:] != series[:-1]])
        keys = [batch.keys[i] for i in series[starts].tolist()]
        before = np.r_[-math.inf, ts[:-1]]
        before[starts] = [self._last.get(k, -math.inf) for k in keys]
        ids = np.array([self._id(k) for k in batch.keys], np.int64)
        bits = batch.value.view(np.int64)[order]
        if (ts <= before).any():  # a copy or a late sample: the rare, slow path
            kept = self._originals(ids[series], ts, bits, before)
            if not kept.all():
                return self(self._without(batch, order[~kept]))
            ts = self._raised(ts, starts, before)
            out = np.empty_like(batch.ts)
            out[order] = ts
            batch = dataclasses.replace(batch, ts=out)
        self._last.update(zip(keys, np.maximum.reduceat(ts, starts).tolist(), strict=True))
        self._remember(ids[series], ts, bits)
        return batch

    def _id(self, key: SeriesKey) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = self._next_id
            self._next_id += 1
        return found

    def forget_run(self, run: str) -> None:
        """Drop the series of a run that ended (its copies age out of ``_taken`` by themselves)."""
        self._last = {k: t for k, t in self._last.items() if k.label("run") != run}
        self._ids = {k: i for k, i in self._ids.items() if k.label("run") != run}

    def _originals(
        self, ids: np.ndarray, ts: np.ndarray, bits: np.ndarray, before: np.ndarray
    ) -> np.ndarray:
        """Which samples (sorted by series) are not copies of one taken or of one before them."""
        suspects = np.unique(ids[ts <= before])
        doubtful = np.isin(ids, suspects)
        seen = set(self._taken_of(suspects))
        kept = np.ones(ids.shape[0], bool)
        for i in np.flatnonzero(doubtful).tolist():
            sample = (int(ids[i]), float(ts[i]), int(bits[i]))
            kept[i] = sample not in seen
            seen.add(sample)
        self.copies += int((~kept).sum())
        return kept

    def _taken_of(self, wanted: np.ndarray) -> list[tuple[int, float, int]]:
        """The samples taken within the horizon of the series ``wanted``."""
        out: list[tuple[int, float, int]] = []
        for _, ids, ts, bits in self._taken:
            rows = np.isin(ids, wanted)
            out += zip(ids[rows].tolist(), ts[rows].tolist(), bits[rows].tolist(), strict=True)
        return out

    def _remember(self, ids: np.ndarray, ts: np.ndarray, bits: np.ndarray) -> None:
        """Keep the samples taken for ``horizon_s`` of data time, to know their copies."""
        newest = float(ts.max())
        self._taken.append((newest, ids, ts, bits))
        latest = max(t for t, *_ in self._taken)
        self._taken = [p for p in self._taken if p[0] >= latest - self.horizon_s]

    @staticmethod
    def _without(batch: SampleBatch, rows: np.ndarray) -> SampleBatch:
        """The batch less the samples at ``rows``."""
        keep = np.ones(len(batch), bool)
        keep[rows] = False
        return dataclasses.replace(
            batch,
            series=batch.series[keep],
            ts=batch.ts[keep],
            step=batch.step[keep],
            value=batch.value[keep],
        )

    def _raised(self, ts: np.ndarray, starts: np.ndarray, before: np.ndarray) -> np.ndarray:
        """Running maximum within each series whose samples go back (the rare, slow path)."""
        ts = ts.copy()
        ends = np.r_[starts[1:], ts.shape[0]]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            if (ts[a:b] < before[a:b]).any():
                fixed = np.maximum.accumulate(np.r_[before[a], ts[a:b]])[1:]
                self.late += int((fixed != ts[a:b]).sum())
                ts[a:b] = fixed
        return ts


class ReorderBuffer:
    """The held samples of one run and the data time up to which they were released."""

    def __init__(self, lateness_s: float) -> None:
        self.lateness_s = lateness_s
        self.frontier = -math.inf  # every released sample is at or before this time
        self.newest = -math.inf
        self.late = 0
        self._keys: list[SeriesKey] = []
        self._ids: dict[SeriesKey, int] = {}
        self._parts: list[tuple[np.ndarray, ...]] = []  # series id, ts, step, value

    def __len__(self) -> int:
        return sum(part[0].shape[0] for part in self._parts)

    def add(self, batch: SampleBatch, rows: np.ndarray) -> None:
        """Hold the samples of ``batch`` at ``rows``."""
        if not rows.size:
            return
        ids = np.array([self._intern(k) for k in batch.keys], np.int64)
        ts = batch.ts[rows]
        self._parts.append((ids[batch.series[rows]], ts, batch.step[rows], batch.value[rows]))
        self.newest = max(self.newest, float(ts.max()))

    def _intern(self, key: SeriesKey) -> int:
        index = self._ids.get(key)
        if index is None:
            index = self._ids[key] = len(self._keys)
            self._keys.append(key)
        return index

    def release(self, force: bool = False) -> SampleBatch | None:
        """Samples older than the newest minus the lateness (all with ``force``), in time order."""
        if not self._parts:
            return None
        sid, ts, step, value = (np.concatenate(c) for c in zip(*self._parts, strict=True))
        ready = np.ones(ts.shape[0], bool) if force else ts <= self.newest - self.lateness_s
        if not ready.any():
            self._parts = [(sid, ts, step, value)]
            return None
        rest = ~ready
        self._parts = [(sid[rest], ts[rest], step[rest], value[rest])] if rest.any() else []
        out_ts = ts[ready]
        self.late += int((out_ts < self.frontier).sum())
        out_ts = np.maximum(out_ts, self.frontier)
        order = np.argsort(out_ts, kind="stable")
        out_ts, sid = out_ts[order], sid[ready][order]
        self.frontier = float(out_ts[-1])
        present, index = np.unique(sid, return_inverse=True)
        return SampleBatch(
            "reorder",
            0,
            [self._keys[i] for i in present.tolist()],
            index.astype(np.uint32),
            out_ts,
            step[ready][order],
            value[ready][order],
        )


class Reorder:
    """One ``ReorderBuffer`` per run; a run that stays quiet for ``idle_s`` is released whole.

    Args:
        lateness_s: how far behind the newest sample of its run a sample may arrive (data time).
        idle_s: wall seconds without new samples after which a run's held samples go out.
        monotonic: the wall clock for ``idle_s``.
    """

    def __init__(self, lateness_s: float, idle_s: float, monotonic: Callable[[], float]) -> None:
        if lateness_s < 0:
            raise ValueError("lateness_s must be >= 0")
        self.lateness_s, self.idle_s, self._monotonic = lateness_s, idle_s, monotonic
        self._runs: dict[str, ReorderBuffer] = {}
        self._touched: dict[str, float] = {}
        self._late_forgotten = 0  # ``late`` of the runs dropped by ``forget``

    @property
    def late(self) -> int:
        """Samples released after their run had moved past them (their time was raised)."""
        return self._late_forgotten + sum(b.late for b in self._runs.values())

    def forget(self, run: str) -> SampleBatch | None:
        """Drop a run's buffer (the run ended, or went quiet for good); what it still held."""
        buffer = self._runs.pop(run, None)
        self._touched.pop(run, None)
        if buffer is None:
            return None
        held = buffer.release(force=True)
        self._late_forgotten += buffer.late
        return held

    def rebase(self) -> None:
        """Restored in another process, whose wall clock means nothing here: every run held
        waits ``idle_s`` from now."""
        self._touched = dict.fromkeys(self._touched, self._monotonic())

    @property
    def held(self) -> int:
        return sum(len(b) for b in self._runs.values())

    def add(self, batch: SampleBatch, wanted: Callable[[SeriesKey], bool]) -> None:
        """Hold the samples of ``batch`` whose series are ``wanted``, each under its run."""
        if not len(batch):
            return
        runs = [(k.label("run") or _NO_RUN) if wanted(k) else None for k in batch.keys]
        names = sorted({r for r in runs if r is not None})
        if not names:
            return
        code = np.array([-1 if r is None else names.index(r) for r in runs], np.int64)
        per_row = code[batch.series]
        now = self._monotonic()
        for i, run in enumerate(names):
            buffer = self._runs.setdefault(run, ReorderBuffer(self.lateness_s))
            buffer.add(batch, np.flatnonzero(per_row == i))
            self._touched[run] = now

    def release(self, force: bool = False) -> list[SampleBatch]:
        """What each run may release now: up to its watermark, or all when idle or forced."""
        now = self._monotonic()
        out = []
        for run, buffer in self._runs.items():
            idle = now - self._touched.get(run, now) >= self.idle_s
            if (batch := buffer.release(force or idle)) is not None:
                out.append(batch)
        return out
