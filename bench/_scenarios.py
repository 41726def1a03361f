"""Generated scenarios for the detection benchmarks (../shared/scenarios, when it is there)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from stepwatch.demo import Imperfections, imperfect

SCENARIOS = Path(__file__).resolve().parents[2] / "shared" / "scenarios"
CACHE = Path(__file__).resolve().parents[1] / ".bench" / "scenarios"


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
    """The imperfections real telemetry has, as rates, for scenarios of any length and size.

    ``drop``: share of the agents' (hardware) samples lost at random; ``bursts``: per node and
    hour, bursts of 5-30 s in which an agent loses every sample; ``gaps``: per node and hour,
    pauses of ``gap_s`` (min, max) seconds in which an agent reports nothing while its node's
    ranks keep training (an agent restart, a scrape timeout); ``skew_s``: the nodes' clocks
    spread over +-this many seconds; ``tails``: Student-t(3) noise of this share of the loss.
    Applied by the demo's own ``imperfect``; labels keep true time, as ground truth does.
    """

    drop: float = 0.0
    bursts: float = 0.0
    gaps: float = 0.0
    gap_s: tuple[float, float] = (30.0, 90.0)
    skew_s: float = 0.0
    tails: float = 0.0

    def __bool__(self) -> bool:
        return any((self.drop, self.bursts, self.gaps, self.skew_s, self.tails))

    def name(self) -> str:
        rates = ("drop", self.drop), ("bursts", self.bursts), ("gaps", self.gaps)
        parts = [
            f"{k}{v:g}" for k, v in (*rates, ("skew", self.skew_s), ("tails", self.tails)) if v
        ]
        if self.gaps:
            parts.append(f"gap{self.gap_s[0]:g}-{self.gap_s[1]:g}")
        return "-".join(parts)

    def text(self) -> str:
        return self.name().replace("-", ", ") if self else "none"

    def of(self, meta: dict, seed: int) -> Imperfections:
        """The imperfections of one scenario (its ``labels.json``): rates made counts."""
        node_hours = meta["nodes"] * (meta["end"] - meta["start"]) / 3600
        return Imperfections(
            seed=seed,
            drop=self.drop,
            bursts=round(self.bursts * node_hours),
            gaps=round(self.gaps * node_hours),
            gap_s=self.gap_s,
            skew_s=self.skew_s,
            tails=self.tails,
        )


def perturbed(folder: Path, mess: Mess, seed: int = 0) -> Path:
    """A copy of ``folder`` with ``mess`` applied (made once and kept beside it)."""
    if not mess:
        return folder
    out = folder.with_name(f"{folder.name}-{mess.name()}-m{seed}")
    if (out / ".complete").exists():
        return out
    for i, run in enumerate(runs(folder)):
        (out / run.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(run / "labels.json", out / run.name / "labels.json")
        meta = json.loads((run / "labels.json").read_text())
        lines = [json.loads(x) for x in (run / "logs.jsonl").read_text().splitlines() if x]
        table = pq.read_table(run / "metrics.parquet")
        table, lines = imperfect(table, lines, mess.of(meta, seed * 1000 + i), meta["nodes"])
        pq.write_table(table, out / run.name / "metrics.parquet")
        text = "".join(json.dumps(x) + "\n" for x in lines)
        (out / run.name / "logs.jsonl").write_text(text)
    (out / ".complete").touch()
    return out
