"""How fast detection runs over recorded data: samples/s through the full rule pack.

Run: python bench/replay.py [PATH ...] [--seed 5 --count 8] [--rules FILE]
Replays scenario folders (generated from ../shared/scenarios when no PATH is
given) and prints samples/s of reading alone and of reading plus the engine,
so the engine's own rate can be told apart; --rules adds to the built-in pack, as the
collector's does. Target: >= 1,000,000 samples/s.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _scenarios import runs, scenarios

from stepwatch.detect import RuleFiles, builtin_rules, describe, read_recorded, replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--rules", type=Path, default=None)
    args = parser.parse_args()
    paths = args.paths or runs(scenarios(args.seed, args.count))
    rules = RuleFiles([args.rules] if args.rules else [], base=builtin_rules()).load()
    total = sum(describe(p).samples for p in paths)
    t0 = time.perf_counter()
    for path in paths:
        for _ in read_recorded(path):
            pass
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    alerts = sum(1 for path in paths for _ in replay(path, rules))
    full_s = time.perf_counter() - t0
    engine_s = max(full_s - read_s, 1e-9)
    print(f"{len(paths)} recorded runs, {total:,} samples, {len(rules)} rules, {alerts} alerts")
    print(f"{'reading only':28} {total / read_s:14,.0f} samples/s  ({read_s:.2f} s)")
    print(f"{'reading + detection':28} {total / full_s:14,.0f} samples/s  ({full_s:.2f} s)")
    print(
        f"{'detection alone (estimate)':28} {total / engine_s:14,.0f} samples/s"
        "   target >= 1,000,000"
    )


if __name__ == "__main__":
    main()
