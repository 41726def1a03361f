"""Generated scenarios for the detection benchmarks (../shared/scenarios, when it is there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
