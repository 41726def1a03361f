"""Telemetry as it really arrives, for the robustness tests: streams of samples from their
sources, the imperfections of real collection applied to them, and the live collector's path
from arriving batches to firing alerts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from stepwatch.detect import Alert, Engine, RuleSet
from stepwatch.detect.detectors._registry import DETECTORS
from stepwatch.detect.live._engines import _split
from stepwatch.detect.live._reorder import Reorder, SeriesOrder, merge
from stepwatch.model import NO_STEP, SampleBatch, SeriesKey

T0 = 1_780_000_000.0
SDK_S, AGENT_S = 1.0, 5.0  # data time one batch holds: an SDK's flush, an agent's read
DRAIN_S = 10.0  # the live detector takes what arrived in this much time as one batch
GAP_S = 180.0  # the gap in one source ends this long before the fault
NODES = 3


@dataclass
class Stream:
    """One series as a source sends it: where from, when, at which step, what."""

    name: str
    labels: dict[str, str]
    source: str
    ts: np.ndarray
    value: np.ndarray
    step: np.ndarray | None = None


@dataclass
class Mess:
    """The imperfections of one variant."""

    lost: float = 0.0  # share of samples lost at random
    bursts: bool = False  # losses of 5-30 s, about 5 % of each series
    gap: bool = False  # the fault's source silent for GAP_S, ending a minute before the fault
    skew: bool = False  # each node's clock off by up to +-1 s
    shuffled: bool = False  # a third of each source's batches arrive after the next one
    duplicates: bool = False  # 5 % of samples sent twice (same batch or the next)
    tails: bool = False  # Student-t(3) noise instead of normal
    slower: int = 1  # from half-way to the fault, one sample in ``slower`` is sent


VARIANTS = {
    "clean": Mess(),
    "lost": Mess(lost=0.05),
    "bursts": Mess(bursts=True),
    "gap": Mess(gap=True),
    "skew": Mess(skew=True),
    "shuffled": Mess(shuffled=True),
    "duplicates": Mess(duplicates=True),
    "tails": Mess(tails=True),
    "slower": Mess(slower=3),
}


@dataclass
class Signal:
    """Makes a case's streams: the clock of each cadence and the noise of the variant."""

    rng: np.random.Generator
    mess: Mess
    end_s: float

    def noise(self, n: int) -> np.ndarray:
        return self.rng.standard_t(3, n) if self.mess.tails else self.rng.standard_normal(n)

    def times(self, every_s: float) -> np.ndarray:
        return T0 + np.arange(0.0, self.end_s, every_s) + self.rng.uniform(0, 0.05)


@dataclass(frozen=True)
class Case:
    """A rule's healthy and faulty telemetry; ``make(signal, faulty)`` gives the streams."""

    rule: str
    make: Callable[[Signal, bool], list[Stream]]
    onset_s: float
    within_s: float  # the bound on detection after the onset, clean
    entity: dict[str, str] = field(default_factory=dict)
    gap_source: str = "node1/agent"
    per_sample: bool = False  # the delay is counted in samples: it grows with the interval


def bound_for(case: Case, mess: Mess) -> float:
    """How long after the onset the alert may come under ``mess``."""
    bound = case.within_s + DRAIN_S
    if mess.bursts:
        bound += 30.0
    if mess.shuffled:  # a batch that arrives after the next one: judged at that one's time,
        bound += 2 * AGENT_S  # or lost to the rules comparing members, which decided without it
    if mess.slower > 1:
        bound = bound * mess.slower if case.per_sample else bound + 60.0
    return bound


def spoiled(
    case: Case, streams: list[Stream], mess: Mess, rng: np.random.Generator
) -> list[Stream]:
    """The streams as the collector receives them (still one source's samples in order)."""
    skew = {f"node{n}": rng.uniform(-1.0, 1.0) if mess.skew else 0.0 for n in range(NODES)}
    out = []
    for s in streams:
        t = s.ts - T0
        keep = np.ones(t.size, bool)
        if mess.lost:
            keep &= rng.random(t.size) >= mess.lost
        if mess.bursts:
            for start in rng.uniform(0, t[-1], max(1, int(t[-1] / 360))):
                keep &= ~((t >= start) & (t < start + rng.uniform(5, 30)))
        if mess.gap and s.source == case.gap_source:
            end = case.onset_s - 60.0
            keep &= ~((t >= end - GAP_S) & (t < end))
        if mess.slower > 1:
            later = t >= case.onset_s / 2
            index = np.cumsum(later)
            keep &= ~later | (index % mess.slower == 0)
        step = None if s.step is None else s.step[keep]
        ts = s.ts[keep] + skew[s.labels.get("node", "node0")]
        out.append(replace(s, ts=ts, value=s.value[keep], step=step))
    return out


def span_of(source: str) -> float:
    """Data time one batch of ``source`` holds: an SDK flushes every second, the agent sends
    each read (every 5 s)."""
    return AGENT_S if source.endswith("agent") else SDK_S


def drained(streams: list[Stream], mess: Mess, rng: np.random.Generator) -> list[SampleBatch]:
    """Each source's samples cut into its batches, merged as the collector drains them."""
    by_source: dict[str, list[Stream]] = {}
    for s in streams:
        by_source.setdefault(s.source, []).append(s)
    arrived: list[tuple[float, int, SampleBatch]] = []
    for source, group in by_source.items():
        for arrives, batch in sent(source, group, mess, rng):
            arrived.append((arrives, len(arrived), batch))
    arrived.sort(key=lambda item: (item[0], item[1]))
    taken: dict[int, list[SampleBatch]] = {}
    for arrives, _, batch in arrived:
        taken.setdefault(int((arrives - T0) // DRAIN_S), []).append(batch)
    return [merge(batches) for _, batches in sorted(taken.items())]


def sent(
    source: str, group: list[Stream], mess: Mess, rng: np.random.Generator
) -> list[tuple[float, SampleBatch]]:
    """One source's batches and when each arrives."""
    keys = [SeriesKey.of(s.name, s.labels) for s in group]
    series = np.concatenate([np.full(s.ts.size, i, np.uint32) for i, s in enumerate(group)])
    ts = np.concatenate([s.ts for s in group])
    step = np.concatenate(
        [s.step if s.step is not None else np.full(s.ts.size, NO_STEP) for s in group]
    )
    value = np.concatenate([s.value for s in group])
    order = np.argsort(ts, kind="stable")
    series, ts, step, value = series[order], ts[order], step[order], value[order]
    span = span_of(source)
    cut = np.floor((ts - T0) / span).astype(np.int64)
    bounds = np.flatnonzero(np.r_[True, cut[1:] != cut[:-1], True]).tolist()
    out, before = [], np.zeros(0, np.int64)
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        rows = np.arange(a, b)
        if mess.duplicates:  # a sample sent twice, and the last of a batch again with the next
            rows = np.sort(np.r_[rows, rows[rng.random(rows.size) < 0.025]], kind="stable")
            if before.size and rng.random() < 0.05:
                rows = np.r_[before[-1:], rows]
        before = rows
        arrives = float(ts[b - 1]) + (1.5 * span if mess.shuffled and rng.random() < 1 / 3 else 0)
        batch = SampleBatch(source, i, keys, series[rows], ts[rows], step[rows], value[rows])
        out.append((arrives, batch))
    return out


def detect(batches: list[SampleBatch], rules: RuleSet) -> list[Alert]:
    """The firing alerts of ``rules`` on the live collector's path: per-series rules in
    arrival order through the series order, member-comparing rules through the reorder
    buffer (with the live detector's default lateness of 2 s)."""
    per_series, across = _split(rules, DETECTORS)
    now, ordered = Engine(per_series), Engine(across)
    names = {n for r in across.rules for n in (*r.signal.metrics, r.signal.divide_by) if n}
    order, reorder = SeriesOrder(), Reorder(2.0, float("inf"), lambda: 0.0)
    alerts: list[Alert] = []
    for batch in batches:
        alerts += now.process(order(batch))
        reorder.add(batch, lambda key: key.name in names)
        for released in reorder.release():
            alerts += ordered.process(released)
    for released in reorder.release(force=True):
        alerts += ordered.process(released)
    return [a for a in alerts if a.state == "firing"]
