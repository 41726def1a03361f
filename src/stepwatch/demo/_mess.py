"""Telemetry as it really arrives: a recorded run with the imperfections of real collection.

Samples lost at random and in bursts, a node's agent that pauses for a minute while its ranks
train on (an agent restart, a scrape timeout), clocks that disagree by a second between nodes,
samples delivered twice, heavier-tailed loss noise, an agent whose reading interval changes
mid-run; and, for the live path, every producer's batches arriving out of order with the
others'. Labels keep true time, as ground truth does: detection must cope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..detect import read_recorded
from ..model import Event, SampleBatch

__all__ = ["Imperfections", "as_sent", "imperfect"]

#: Metric names an agent reads from the hardware (its heartbeat is not one of them).
AGENT_PREFIXES = ("gpu.", "host.")
#: How long a burst loss lasts: every sample of one node's agent in it is lost.
BURST_S = (5.0, 30.0)


@dataclass(frozen=True, slots=True)
class Imperfections:
    """Which imperfections to apply, seeded.

    Args:
        seed: the imperfections' own random draws.
        drop: share of the agents' hardware samples lost at random.
        bursts: how many bursts of 5-30 s in which one node's agent loses every reading.
        gaps: how many pauses of ``gap_s`` (min, max) seconds in which one node's agent (its
            readings and its heartbeat) sends nothing while that node's ranks keep training.
        gap_s: the length of a pause.
        skew_s: the nodes' clocks spread evenly over +- this (in a seeded order, so two of
            them are twice this apart), for their samples and log lines.
        duplicates: share of all samples delivered a second time (a resend after a lost ack).
        tails: Student-t(3) noise of this share of the loss added to it (heavier tails).
        slower_from_s: from this many seconds in, the agents read only every
            ``slower_every_s`` seconds (None: the interval never changes).
        slower_every_s: the agents' reading interval from then on.
    """

    seed: int = 0
    drop: float = 0.0
    bursts: int = 0
    gaps: int = 0
    gap_s: tuple[float, float] = (30.0, 90.0)
    skew_s: float = 0.0
    duplicates: float = 0.0
    tails: float = 0.0
    slower_from_s: float | None = None
    slower_every_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("drop", "duplicates"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be a share in [0, 1), got {getattr(self, name)}")
        if not 0 < self.gap_s[0] <= self.gap_s[1]:
            raise ValueError(f"gap_s must be (min, max) seconds with 0 < min <= max: {self.gap_s}")


def _silences(
    rng: np.random.Generator, count: int, span: tuple[float, float], t0: float, t1: float
) -> list[tuple[float, float]]:
    """``count`` stretches [a, b) of ``span`` seconds inside (t0 + a minute, t1)."""
    lengths = rng.uniform(*span, count)
    starts = rng.uniform(t0 + 60, np.maximum(t1 - lengths, t0 + 61))
    return [(float(a), float(a + n)) for a, n in zip(starts, lengths, strict=True)]


def _kept(
    mess: Imperfections,
    rng: Callable[[int], np.random.Generator],
    ts: np.ndarray,
    node_col: np.ndarray,
    hardware: np.ndarray,
    agent: np.ndarray,
    names: list[str],
) -> np.ndarray:
    """Which samples survive random and burst losses, agent pauses and a slower interval."""
    t0, t1 = float(ts.min()), float(ts.max())
    keep = ~(hardware & (rng(0).random(len(ts)) < mess.drop))
    lost = ((1, mess.bursts, BURST_S, hardware), (2, mess.gaps, mess.gap_s, agent))
    for stream, count, span, who in lost:
        draw = rng(stream)
        for a, b in _silences(draw, count, span, t0, t1):
            on = node_col == names[int(draw.integers(len(names)))]
            keep &= ~(who & on & (ts >= a) & (ts < b))
    if mess.slower_from_s is not None:
        later = ts - t0 >= mess.slower_from_s
        keep &= ~(hardware & later & ((ts - t0) % mess.slower_every_s >= 0.5))
    return keep


def imperfect(
    table: pa.Table, lines: Sequence[dict[str, Any]], mess: Imperfections, nodes: int
) -> tuple[pa.Table, list[dict[str, Any]]]:
    """A recorded run's samples (scenario format, sorted by ts) and log lines with ``mess``
    applied, both sorted by ts again."""

    def rng(stream: int) -> np.random.Generator:  # one stream each: imperfections independent
        return np.random.default_rng([mess.seed, stream])

    ts, value = table["ts"].to_numpy(), table["value"].to_numpy().copy()
    node_col = table["node"].fill_null("").to_numpy(zero_copy_only=False)
    hardware = np.zeros(len(ts), bool)
    for prefix in AGENT_PREFIXES:
        hardware |= pc.starts_with(table["name"], prefix).to_numpy(zero_copy_only=False)
    agent = hardware | (table["rank"].is_null().to_numpy(zero_copy_only=False) & (node_col != ""))
    names = [f"node{n}" for n in range(nodes)]
    keep = _kept(mess, rng, ts, node_col, hardware, agent, names)
    if mess.tails:
        loss = (table["name"].to_numpy(zero_copy_only=False) == "train.loss") & np.isfinite(value)
        value[loss] += mess.tails * np.abs(value[loss]) * rng(3).standard_t(3, int(loss.sum()))
    spread = np.linspace(-mess.skew_s, mess.skew_s, nodes) if nodes > 1 else np.zeros(1)
    offsets = dict(zip(names, rng(4).permutation(spread).tolist(), strict=True))
    shift = np.array([offsets.get(n, 0.0) for n in node_col]) if mess.skew_s else 0.0
    table = table.set_column(table.schema.get_field_index("value"), "value", pa.array(value))
    table = table.set_column(table.schema.get_field_index("ts"), "ts", pa.array(ts + shift))
    rows = np.flatnonzero(keep)
    twice = rows[rng(5).random(rows.size) < mess.duplicates]
    rows = np.concatenate([rows, twice])
    kept = table.take(pa.array(rows))
    order = np.argsort(kept["ts"].to_numpy(), kind="stable")
    moved = [{**line, "ts": line["ts"] + offsets.get(line["node"], 0.0)} for line in lines]
    return kept.take(pa.array(order)), sorted(moved, key=lambda line: line["ts"])


def _producer(labels: dict[str, str]) -> str:
    """Who sends a series: a rank's process, else its node's agent, else the run."""
    if "rank" in labels:
        return f"rank{labels['rank']}"
    return labels.get("node", "run")


def as_sent(path: str | Path, seed: int, flush_s: float = 1.0, delay_s: float = 0.9) -> list:
    """A recorded run as the collector receives it: every producer ships what it logged each
    ``flush_s`` seconds in one batch, which arrives up to ``delay_s`` later; batches come in
    the order they arrive, each producer's in its own order, everyone's interleaved."""
    rng = np.random.default_rng(seed)
    parts = [chunk.batch for chunk in read_recorded(path)]
    keys = parts[-1].keys
    series = np.concatenate([b.series for b in parts])
    ts, step = np.concatenate([b.ts for b in parts]), np.concatenate([b.step for b in parts])
    value = np.concatenate([b.value for b in parts])
    names, code = np.unique([_producer(dict(k.labels)) for k in keys], return_inverse=True)
    window = np.floor((ts - ts.min()) / flush_s).astype(np.int64)
    group = code[series] * (int(window.max()) + 1) + window
    order = np.argsort(group, kind="stable")  # within a group, in time order still
    cuts = np.flatnonzero(np.diff(group[order])) + 1
    out: list[tuple[float, SampleBatch]] = []
    for n, rows in enumerate(np.split(order, cuts)):
        arrives = float(ts.min() + (window[rows[0]] + 1) * flush_s + rng.uniform(0, delay_s))
        producer = str(names[code[series[rows[0]]]])
        batch = SampleBatch(producer, n, keys, series[rows], ts[rows], step[rows], value[rows])
        out.append((arrives, batch))
    out += [
        (e.ts + float(rng.uniform(0, delay_s)), _log_batch(e, keys))
        for b in parts
        for e in b.events
    ]
    out.sort(key=lambda ab: ab[0])
    return [batch for _, batch in out]


def _log_batch(event: Event, keys: list) -> SampleBatch:
    """A batch that carries one log line and no samples."""
    empty = np.empty(0)
    return SampleBatch(
        "logs", 0, keys, empty.astype(np.uint32), empty, empty.astype(np.int64), empty, [event]
    )
