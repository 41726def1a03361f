"""Incidents on generated scenarios: is the root cause right, and are two faults two incidents?

Run: python bench/incidents.py [--seeds S ...] [--count 24]
Replays the scenarios of each seed (../shared/scenarios/generate.py; without --seeds, two
fresh seeds, printed) through the built-in rules, groups each scenario's alerts into incidents
(stepwatch.detect.incidents) and scores them against the scenarios' labels:

- each label is placed in the incident of the first alert that finds it (its kind, naming its
  entity, within its window, as score.py counts);
- an incident holding labels should name as its root cause the one of them that began first
  (a dead node before the collective timeouts it causes): top-1 is right when its first cause
  has that kind and names that entity's node;
- two faults of a scenario neither of which lists the other as a symptom (``also``) are
  independent: they should be two incidents.

Prints per-kind top-1 accuracy, the overall figure, and how often independent faults were kept
apart. Never passes or fails on time.
"""

from __future__ import annotations

import argparse
import itertools
import secrets
from collections import Counter
from dataclasses import dataclass, field

from _scenarios import runs, scenarios

from stepwatch.detect import PRECURSORS, builtin_rules, incidents, replay
from stepwatch.detect.replay._scoring import Label, Scenario, _in_window, _Where


@dataclass(frozen=True)
class Seen:
    """An alert as grouping needs it."""

    kind: str
    since: float
    run: str
    severity: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ts(self) -> float:
        return self.since


def _finds(alert: Seen, label: Label, scenario: Scenario) -> bool:
    where = _Where.of(alert.labels, scenario.gpus_per_node)
    target = _Where.of(label.entity, scenario.gpus_per_node)
    return alert.kind == label.kind and _in_window(alert.since, label) and where.names(target)


def _independent(a: Label, b: Label) -> bool:
    return a.kind not in b.also and b.kind not in a.also and a.kind != b.kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 2 fresh")
    parser.add_argument("--count", type=int, default=24)
    args = parser.parse_args()
    seeds = args.seeds or [secrets.randbelow(1_000_000) for _ in range(2)]
    print(f"seeds {' '.join(map(str, seeds))} (fresh: {args.seeds is None})")
    rules = builtin_rules()
    right, asked = Counter[str](), Counter[str]()
    apart = pairs = unfound = 0
    for seed in seeds:
        for path in runs(scenarios(seed, args.count)):
            scenario = Scenario.read(path)
            if scenario.clean:
                continue
            seen = [
                Seen(a.kind, a.since, scenario.run, a.severity, dict(a.labels))
                for a in replay(path, rules)
                if a.kind not in PRECURSORS and a.kind != "telemetry_gap"
            ]
            found = incidents(seen)
            home: dict[int, int] = {}  # label -> its incident
            for n, label in enumerate(scenario.labels):
                first = next((a for a in sorted(seen, key=lambda a: a.since)
                              if _finds(a, label, scenario)), None)  # fmt: skip
                if first is None:
                    unfound += 1
                    continue
                home[n] = next(i for i, inc in enumerate(found) if first in inc.alerts)
            for i in set(home.values()):
                held = [scenario.labels[n] for n, at in home.items() if at == i]
                expected = min(held, key=lambda label: label.start)
                cause = found[i].causes()[0].alert
                node = _Where.of(expected.entity, scenario.gpus_per_node).node
                asked[expected.kind] += 1
                right[expected.kind] += cause.kind == expected.kind and (
                    node is None or cause.labels.get("node") == node
                )
            for a, b in itertools.combinations(sorted(home), 2):
                la, lb = scenario.labels[a], scenario.labels[b]
                if _independent(la, lb):
                    pairs += 1
                    apart += home[a] != home[b]
    print(f"  {'root cause (the first label of the incident)':46} {'top-1':>12}")
    for kind in sorted(asked):
        print(f"  {kind:46} {right[kind]:>5} / {asked[kind]:<5}")
    total, good = sum(asked.values()), sum(right.values())
    print(f"top-1 root cause: {good} of {total} incidents ({good / max(1, total):.1%}); "
          f"{unfound} labels no alert found (not counted)")  # fmt: skip
    print(f"independent faults of one scenario kept apart: {apart} of {pairs} pairs")


if __name__ == "__main__":
    main()
