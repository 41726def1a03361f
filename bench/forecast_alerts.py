"""Forecast alerts on generated scenarios and on the demo's own faults: told before the fault,
and never on a healthy run.

Run: python bench/forecast_alerts.py [--seed S] [--count 48] [--demo-s 3600] [--no-demo]
Generates (once, under .bench/scenarios) ``--count`` scenarios of a fresh seed (printed) with
../shared/scenarios/generate.py when it is there, and records runs of the demo with its memory,
heat, host memory and disk faults. Replays the built-in forecasts and the faults' own rules
(which mute their forecast once they fire) and prints, per forecast kind: the faults of the
kinds it foretells, how many got the forecast on their entity before the fault's label began
and before the data crossed the line (GPU memory at 90 % of total, 85 °C; the label's start
for the others), the median lead before that crossing, how far the predicted time was off
where the data reached the forecast's target, and the forecast incidents on clean scenarios
and in all (false: no fault of theirs came, by stepwatch.detect.score and PRECURSORS).
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from _scenarios import SCENARIOS, runs, scenarios

from stepwatch.demo import DemoConfig, Fault, record_scenario
from stepwatch.detect import (
    PRECURSORS,
    AlertRecord,
    RuleSet,
    Scenario,
    builtin_rules,
    replay,
    score,
    to_record,
)

#: The series each forecast reads, its divisor, the line whose crossing is the fault and the
#: forecast's own target (None: the label's start stands for the crossing).
LINES: dict[str, tuple[str, str | None, float | None, float | None]] = {
    "forecast_oom": ("gpu.mem_used_bytes", "gpu.mem_total_bytes", 0.9, 1.0),
    "forecast_thermal": ("gpu.temp_c", None, 85.0, 85.0),
    "forecast_host_oom": ("host.mem_used_bytes", "host.mem_total_bytes", None, 1.0),
    "forecast_disk_full": ("host.disk_free_bytes", None, None, None),
}
#: The demo's faults of those kinds; host memory leaking fast enough to fill the host.
DEMO_FAULTS = (
    "gpu_memory_pressure@900:node1/gpu3",
    "gpu_thermal@1200:node1/gpu2",
    "host_memory_leak@1200:node1*300",
    "disk_full@600:node1*1",
    "",  # a healthy run
)


@dataclass
class Tally:
    """One forecast kind's figures over a set of runs."""

    faults: int = 0
    before_label: int = 0
    before_line: int = 0
    leads: list[float] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    clean: int = 0
    incidents: int = 0
    false: int = 0


def _rules() -> RuleSet:
    """The forecasts and the rules of the faults they foretell (which inhibit them)."""
    kinds = set(PRECURSORS) | {k for p in PRECURSORS.values() for k in p.kinds}
    return RuleSet(tuple(r for r in builtin_rules().rules if r.kind in kinds))


def _series(path: Path, name: str, entity: dict[str, str | int]) -> tuple[np.ndarray, np.ndarray]:
    table = pq.read_table(path / "metrics.parquet", columns=["ts", "name", "value", "node", "gpu"])
    mask = pc.equal(table["name"], name)
    mask = pc.and_(mask, pc.equal(table["node"], str(entity["node"])))
    if "gpu" in entity:
        mask = pc.and_(mask, pc.equal(table["gpu"], int(entity["gpu"])))
    rows = table.filter(mask)
    return rows["ts"].to_numpy(), rows["value"].to_numpy()


def _crossing(path: Path, kind: str, entity: dict[str, str | int], line: float) -> float | None:
    """When the series (over its divisor) first has a median of a minute at or past ``line``."""
    name, divisor, _, _ = LINES[kind]
    ts, value = _series(path, name, entity)
    if divisor is not None:
        d_ts, d_value = _series(path, divisor, entity)
        value = value / np.interp(ts, d_ts, d_value)
    for i in range(ts.size):
        window = value[(ts > ts[i] - 60.0) & (ts <= ts[i])]
        if np.median(window) >= line:
            return float(ts[i])
    return None


def _tally(folders: list[Path]) -> dict[str, Tally]:
    tallies = {kind: Tally() for kind in PRECURSORS}
    rules, records, clean = _rules(), [], set()
    for path in folders:
        scenario = Scenario.read(path)
        got = [to_record(a) for a in replay(path, rules)]
        records += got
        if scenario.clean:
            clean.add(scenario.run)
        for kind, precursor in PRECURSORS.items():
            mine = [a for a in got if a.kind == kind]
            for label in scenario.labels:
                if label.kind == precursor.kinds[0]:
                    _judge(tallies[kind], path, kind, label.entity, label.start, mine)
    for incident in score(records, folders).incidents:
        if incident.kind in tallies:
            tally = tallies[incident.kind]
            tally.incidents += 1
            tally.false += not incident.true
            tally.clean += incident.run in clean
    return tallies


def _judge(
    tally: Tally,
    path: Path,
    kind: str,
    entity: dict[str, str | int],
    start: float,
    alerts: list[AlertRecord],
) -> None:
    """One fault of a kind the forecast foretells: was it told, how early, how well."""
    tally.faults += 1
    on = [a for a in alerts if all(str(a.labels.get(k)) == str(v) for k, v in entity.items())]
    _, _, line, target = LINES[kind]
    crossed = start if line is None else _crossing(path, kind, entity, line)
    if not on:
        return
    first = min(on, key=lambda a: a.ts)
    tally.before_label += first.ts < start
    if crossed is not None and first.ts < crossed:
        tally.before_line += 1
        tally.leads.append(crossed - first.ts)
    reached = None if target is None else _crossing(path, kind, entity, target)
    predicted = first.extra.get("predicted_ts")
    if reached is not None and isinstance(predicted, float):
        tally.errors.append(predicted - reached)


def _table(title: str, tallies: dict[str, Tally]) -> None:
    print(title)
    print(
        f"  {'forecast':20} {'faults':>6} {'<label':>7} {'<line':>6} {'median lead':>12} "
        f"{'predicted off (median)':>23} {'clean':>6} {'incid.':>7} {'false':>6}"
    )
    for kind, t in tallies.items():
        lead = f"{statistics.median(t.leads) / 60:.1f} min" if t.leads else "-"
        off = f"{statistics.median(t.errors) / 60:+.1f} min" if t.errors else "-"
        print(
            f"  {kind:20} {t.faults:6d} {t.before_label:7d} {t.before_line:6d} {lead:>12} "
            f"{off:>23} {t.clean:6d} {t.incidents:7d} {t.false:6d}"
        )


def _demo(root: Path, duration_s: float, seed: int) -> list[Path]:
    """The demo's own faults, one run each, and a healthy run, all recorded as scenarios."""
    folders = []
    for i, spec in enumerate(DEMO_FAULTS):
        faults = (Fault.parse(spec),) if spec else ()
        config = DemoConfig(
            nodes=2, gpus_per_node=4, seed=seed + i, duration_s=duration_s, faults=faults
        )
        folders.append(record_scenario(config, root).path)
    return folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one")
    parser.add_argument("--count", type=int, default=48)
    parser.add_argument("--demo-s", type=float, default=3600.0, help="each demo run's length")
    parser.add_argument("--no-demo", action="store_true")
    args = parser.parse_args()
    seed = secrets.randbelow(1_000_000) if args.seed is None else args.seed
    print(f"seed {seed} (fresh: {args.seed is None})")
    if (SCENARIOS / "generate.py").exists():
        t0 = time.perf_counter()
        folder = scenarios(seed, args.count)
        tallies = _tally(runs(folder))
        took = time.perf_counter() - t0
        _table(f"generated scenarios, seed {seed}, {args.count} ({took:.0f} s):", tallies)
    else:
        print(f"no scenario generator at {SCENARIOS}: generated scenarios skipped")
    if not args.no_demo:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            folders = _demo(Path(tmp), args.demo_s, seed)
            tallies = _tally(folders)
            took = time.perf_counter() - t0
            faults = ", ".join(json.dumps(f) for f in DEMO_FAULTS if f)
            _table(
                f"demo runs of {args.demo_s:.0f} s: {faults}, one healthy ({took:.0f} s):", tallies
            )


if __name__ == "__main__":
    main()
