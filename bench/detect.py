"""Detection quality on generated scenarios: replay + score.py, per kind, per seed.

Run: python bench/detect.py [--seeds 0 1] [--count 48] [--rules FILE] [--drop 0.05 --jitter 0.5]
Generates (once, under .bench/scenarios) the scenarios of each seed with
../shared/scenarios/generate.py, replays them through the rule pack, scores
the alerts with ../shared/scenarios/score.py and prints its table per seed
with the targets: precision >= 0.95, timely recall >= 0.95, <= 0.1 false
alerts per clean hour. --drop and --jitter score copies of the scenarios with
lost samples and clock jitter.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _scenarios import SCENARIOS, perturbed, runs, scenarios

from stepwatch.detect import DETECTORS, builtin_rules, load_rules, replay, to_record, write_alerts


def _score(folder: Path, alerts: Path) -> dict:
    command = [sys.executable, str(SCENARIOS / "score.py"), str(folder), str(alerts), "--json"]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def _table(result: dict) -> None:
    print(
        f"  {'kind':24} {'labels':>6} {'found':>6} {'timely':>6} {'tp':>5} {'fp':>5} {'delay':>9}"
    )
    for kind, v in result["per_kind"].items():
        delay = "-" if v["median_delay_s"] is None else f"{v['median_delay_s']:.0f}s"
        print(
            f"  {kind:24} {v['labels']:6d} {v['detected']:6d} {v['timely']:6d} "
            f"{v['tp']:6d} {v['fp']:6d} {delay:>9}"
        )
    print(
        f"  precision {result['precision']:.3f} (target >= 0.95)   "
        f"timely recall {result['timely_recall']:.3f} (target >= 0.95)   "
        f"false alerts per clean hour {result['clean_fp_per_hour']:.2f} (target <= 0.1)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--count", type=int, default=48)
    parser.add_argument("--rules", type=Path, default=None)
    parser.add_argument("--drop", type=float, default=0.0, help="share of samples to lose")
    parser.add_argument("--jitter", type=float, default=0.0, help="+- seconds of clock jitter")
    args = parser.parse_args()
    rules = load_rules(args.rules, DETECTORS) if args.rules else builtin_rules()
    for seed in args.seeds:
        folder = perturbed(scenarios(seed, args.count), args.drop, args.jitter)
        t0 = time.perf_counter()
        records = [to_record(a) for path in runs(folder) for a in replay(path, rules)]
        elapsed = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            alerts = Path(tmp) / "alerts.jsonl"
            write_alerts(alerts, records)
            result = _score(folder, alerts)
        print(f"seed {seed}, {args.count} scenarios: {len(records)} alerts in {elapsed:.1f} s")
        _table(result)


if __name__ == "__main__":
    main()
