"""Generated scenarios for the detection benchmarks (../shared/scenarios, when it is there)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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


def perturbed(folder: Path, drop: float, jitter_s: float, seed: int = 0) -> Path:
    """A copy of ``folder`` with a share ``drop`` of the samples lost and every timestamp moved
    by up to +-``jitter_s`` seconds (clock jitter), made once and kept beside it."""
    if not drop and not jitter_s:
        return folder
    out = folder.with_name(f"{folder.name}-drop{drop:g}-jitter{jitter_s:g}")
    if (out / ".complete").exists():
        return out
    rng = np.random.default_rng(seed)
    for run in runs(folder):
        (out / run.name).mkdir(parents=True, exist_ok=True)
        for name in ("labels.json", "logs.jsonl"):
            shutil.copy(run / name, out / run.name / name)
        table = pq.read_table(run / "metrics.parquet")
        kept = table.filter(pa.array(rng.random(table.num_rows) >= drop))
        ts = kept["ts"].to_numpy() + rng.uniform(-jitter_s, jitter_s, kept.num_rows)
        kept = kept.set_column(kept.schema.get_field_index("ts"), "ts", pa.array(ts))
        pq.write_table(kept.take(np.argsort(ts, kind="stable")), out / run.name / "metrics.parquet")
    (out / ".complete").touch()
    return out
