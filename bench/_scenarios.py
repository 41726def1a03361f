"""Generated scenarios for the detection benchmarks (../shared/scenarios, when it is there)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SCENARIOS = Path(__file__).resolve().parents[2] / "shared" / "scenarios"
CACHE = Path(__file__).resolve().parents[1] / ".bench" / "scenarios"
#: The metric families an agent reports (a node's hardware); the rest come from the trainer.
AGENT_PREFIXES = ("gpu.", "host.")


def scenarios(seed: int, count: int) -> Path:
    """The folder of ``generate.py --seed SEED --count COUNT``, generated once and kept."""
    out = CACHE / f"seed{seed}-count{count}"
    if not (out / ".complete").exists():
        if not (SCENARIOS / "generate.py").exists():
            sys.exit(f"no scenario generator at {SCENARIOS}; pass scenario folders instead")
        print(f"generating {count} scenarios with seed {seed} into {out} ...", flush=True)
        generate = [sys.executable, str(SCENARIOS / "generate.py"), str(out)]
        subprocess.run([*generate, "--seed", str(seed), "--count", str(count)], check=True)
        (out / ".complete").touch()
    return out


def runs(folder: Path) -> list[Path]:
    """The scenario folders inside ``folder``."""
    return sorted(p for p in folder.iterdir() if p.is_dir())


@dataclass(frozen=True)
class Mess:
    """The imperfections real telemetry has, applied to a copy of recorded scenarios.

    ``drop``: share of the agents' (hardware) samples lost at random; ``bursts``: per node and
    hour, bursts of 5-30 s in which its agent loses every sample; ``gaps``: per node and hour,
    stretches of ``gap_s`` (min, max) seconds in which its agent reports nothing while its
    ranks keep training (an agent restart, a scrape timeout); ``skew_s``: each node's clock off
    by up to +-this many seconds, for all its samples and log lines; ``tails``: the loss's noise
    widened by Student-t(3) noise of this share of the loss; ``jitter_s``: every timestamp
    moved by up to +-this much. Labels keep true time, as ground truth does.
    """

    drop: float = 0.0
    bursts: float = 0.0
    gaps: float = 0.0
    gap_s: tuple[float, float] = (30.0, 90.0)
    skew_s: float = 0.0
    tails: float = 0.0
    jitter_s: float = 0.0

    def __bool__(self) -> bool:
        return any((self.drop, self.bursts, self.gaps, self.skew_s, self.tails, self.jitter_s))

    def name(self) -> str:
        parts = [
            f"{k}{v:g}"
            for k, v in (
                ("drop", self.drop),
                ("bursts", self.bursts),
                ("gaps", self.gaps),
                ("skew", self.skew_s),
                ("tails", self.tails),
                ("jitter", self.jitter_s),
            )
            if v
        ]
        if self.gaps:
            parts.append(f"gap{self.gap_s[0]:g}-{self.gap_s[1]:g}")
        return "-".join(parts)

    def text(self) -> str:
        return self.name().replace("-", ", ") if self else "none"


def _silences(rng: np.random.Generator, t0: float, t1: float, per_h: float, span: tuple) -> list:
    """Random stretches [a, b) inside [t0, t1): about ``per_h`` an hour, each ``span`` long."""
    count = rng.poisson(per_h * max(t1 - t0, 0) / 3600)
    starts = rng.uniform(t0, t1, count)
    return [(a, a + rng.uniform(*span)) for a in starts]


def _messed(table: pa.Table, mess: Mess, rng: np.random.Generator) -> tuple[pa.Table, dict]:
    """The table with ``mess`` applied, and each node's clock offset."""
    ts = table["ts"].to_numpy()
    names = table["name"].to_numpy(zero_copy_only=False)
    nodes = table["node"].fill_null("").to_numpy(zero_copy_only=False)
    agent = np.zeros(len(names), dtype=bool)
    for prefix in AGENT_PREFIXES:
        agent |= pc.starts_with(table["name"], prefix).to_numpy(zero_copy_only=False)
    keep = ~(agent & (rng.random(len(ts)) < mess.drop))
    t0, t1 = float(ts.min()), float(ts.max())
    offsets = {}
    for node in sorted(set(nodes) - {""}):
        on = nodes == node
        lost = _silences(rng, t0, t1, mess.bursts, (5.0, 30.0))
        lost += _silences(rng, t0, t1, mess.gaps, mess.gap_s)
        for a, b in lost:
            keep &= ~(on & agent & (ts >= a) & (ts < b))
        offsets[node] = float(rng.uniform(-mess.skew_s, mess.skew_s)) if mess.skew_s else 0.0
    value = table["value"].to_numpy().copy()
    if mess.tails:
        loss = (names == "train.loss") & np.isfinite(value)
        value[loss] += mess.tails * np.abs(value[loss]) * rng.standard_t(3, int(loss.sum()))
    shift = np.array([offsets.get(n, 0.0) for n in nodes])
    if mess.jitter_s:
        shift += rng.uniform(-mess.jitter_s, mess.jitter_s, len(ts))
    table = table.set_column(table.schema.get_field_index("value"), "value", pa.array(value))
    table = table.set_column(table.schema.get_field_index("ts"), "ts", pa.array(ts + shift))
    kept = table.filter(pa.array(keep))
    order = np.argsort(kept["ts"].to_numpy(), kind="stable")
    return kept.take(order), offsets


def perturbed(folder: Path, mess: Mess, seed: int = 0) -> Path:
    """A copy of ``folder`` with ``mess`` applied (made once and kept beside it)."""
    if not mess:
        return folder
    out = folder.with_name(f"{folder.name}-{mess.name()}-m{seed}")
    if (out / ".complete").exists():
        return out
    rng = np.random.default_rng(seed)
    for run in runs(folder):
        (out / run.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(run / "labels.json", out / run.name / "labels.json")
        table, offsets = _messed(pq.read_table(run / "metrics.parquet"), mess, rng)
        pq.write_table(table, out / run.name / "metrics.parquet")
        lines = [json.loads(x) for x in (run / "logs.jsonl").read_text().splitlines() if x]
        for line in lines:
            line["ts"] = round(line["ts"] + offsets.get(line.get("node") or "", 0.0), 3)
        lines.sort(key=lambda x: x["ts"])
        text = "".join(json.dumps(x) + "\n" for x in lines)
        (out / run.name / "logs.jsonl").write_text(text)
    (out / ".complete").touch()
    return out
