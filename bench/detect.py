"""Detection quality on generated scenarios: replay + score.py, per kind, per seed.

Run: python bench/detect.py [--seeds S ...] [--count 24] [--rules FILE] [--messy]
       [--drop 0.05] [--bursts 1] [--gaps 1 --gap-s 30 90] [--skew 1] [--tails 0.015]
Generates (once, under .bench/scenarios) the scenarios of each seed with
../shared/scenarios/generate.py, replays them through the rule pack, scores
the alerts with ../shared/scenarios/score.py and prints its table per seed
and for all seeds together, with the targets: precision >= 0.97, timely
recall >= 0.97, <= 0.1 false alerts per clean hour. Without --seeds it draws
two fresh seeds and prints them, so the figure is never that of the seeds the
rules were tuned on. --messy scores copies of the scenarios as telemetry
really arrives: 5 % of the agents' samples lost, per node about one agent gap
of 30-90 s an hour and one burst loss, each node's clock off by up to +-1 s,
and Student-t(3) noise on the loss; each option sets one of these alone.
telemetry_gap records (a producer silent while its node is heard: info, never
sent) are left out of the scored alerts, which score.py knows no kind of, and
counted on a line of their own; so are the forecasts (stepwatch.detect.PRECURSORS:
warnings before a fault, which score.py would count as false alerts), scored by
bench/forecast_alerts.py.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _scenarios import SCENARIOS, Mess, perturbed, runs, scenarios

from stepwatch.detect import (
    DETECTORS,
    PRECURSORS,
    builtin_rules,
    load_rules,
    replay,
    to_record,
    write_alerts,
)


def _score(folder: Path, alerts: Path) -> dict:
    command = [sys.executable, str(SCENARIOS / "score.py"), str(folder), str(alerts), "--json"]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


#: Recorded, not sent, and no kind of the scenarios' vocabulary: counted apart, never scored.
UNSCORED = "telemetry_gap"


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
        f"  precision {result['precision']:.3f} (target >= 0.97)   "
        f"timely recall {result['timely_recall']:.3f} (target >= 0.97)   "
        f"false alerts per clean hour {result['clean_fp_per_hour']:.2f} (target <= 0.1)"
    )


MESSY = Mess(drop=0.05, bursts=1.0, gaps=1.0, skew_s=1.0, tails=0.015)


def _mess(args: argparse.Namespace) -> Mess:
    base = MESSY if args.messy else Mess()
    given = {
        "drop": args.drop,
        "bursts": args.bursts,
        "gaps": args.gaps,
        "skew_s": args.skew,
        "tails": args.tails,
    }
    fields = {k: v for k, v in given.items() if v is not None}
    if args.gap_s:
        fields["gap_s"] = tuple(args.gap_s)
    return Mess(**{**base.__dict__, **fields})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 2 fresh")
    parser.add_argument("--count", type=int, default=24)
    parser.add_argument("--rules", type=Path, default=None)
    parser.add_argument("--messy", action="store_true", help="all imperfections below")
    parser.add_argument("--drop", type=float, help="share of agent samples lost")
    parser.add_argument("--bursts", type=float, help="burst losses per node and hour")
    parser.add_argument("--gaps", type=float, help="agent gaps per node and hour")
    parser.add_argument("--gap-s", type=float, nargs=2, help="min and max gap seconds")
    parser.add_argument("--skew", type=float, help="+- seconds of per-node clock skew")
    parser.add_argument("--tails", type=float, help="Student-t(3) loss noise, share of loss")
    args = parser.parse_args()
    seeds = args.seeds or [secrets.randbelow(1_000_000) for _ in range(2)]
    mess = _mess(args)
    print(f"seeds {' '.join(map(str, seeds))} (fresh: {args.seeds is None}); mess: {mess.text()}")
    rules = load_rules(args.rules, DETECTORS) if args.rules else builtin_rules()
    folders = []
    for seed in seeds:
        folder = perturbed(scenarios(seed, args.count), mess, seed)
        t0 = time.perf_counter()
        records = [to_record(a) for path in runs(folder) for a in replay(path, rules)]
        elapsed = time.perf_counter() - t0
        gaps = sum(r.kind == UNSCORED for r in records)
        forecasts = sum(r.kind in PRECURSORS for r in records)
        records = [r for r in records if r.kind != UNSCORED and r.kind not in PRECURSORS]
        print(f"seed {seed}, {args.count} scenarios: {len(records)} alerts in {elapsed:.1f} s")
        print(f"  {gaps} {UNSCORED} records (info, not scored)")
        print(f"  {forecasts} forecasts (not scored here: bench/forecast_alerts.py)")
        _table(_scored(folder, records))
        folders.append((folder, records))
    if len(folders) > 1:
        with tempfile.TemporaryDirectory() as tmp:
            both = Path(tmp)
            for folder, _ in folders:
                for run in runs(folder):
                    (both / run.name).symlink_to(run)
            print(f"all {len(seeds)} seeds together:")
            _table(_scored(both, [r for _, records in folders for r in records]))


def _scored(folder: Path, records: list) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        alerts = Path(tmp) / "alerts.jsonl"
        write_alerts(alerts, records)
        return _score(folder, alerts)


if __name__ == "__main__":
    main()
