"""Every fault the demo injects is found by the built-in pack in time, wherever it falls: in the
first minute (while the loss still falls steeply and detectors warm up) as well as later."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepwatch.demo import FAULT_SPECS, DemoConfig, Fault, record_scenario
from stepwatch.detect import builtin_rules, replay, score, to_record

#: Simulated seconds after the fault begins: the slowest kind here (heat) is due 400 s after.
AFTER_S = 480.0
#: The kinds due within minutes of their start on any cluster. The others are graded by
#: tests/detect/replay/test_quality.py: slow ones (a leak is found over an hour), a node's
#: collectives against its peers (three nodes at least) and a slow checkpoint (it shows at the
#: next one).
QUICK_KINDS = [
    kind
    for kind, spec in FAULT_SPECS.items()
    if spec.deadline_s <= 300
    and (spec.deadline_steps or 0) <= 600
    and kind not in ("sync_latency", "checkpoint_slow")
]


def _found_in_time(kind: str, at: float, seed: int, after_s: float, root: Path) -> None:
    config = DemoConfig(
        nodes=2,
        gpus_per_node=2,
        seed=seed,
        duration_s=at + after_s,
        faults=(Fault(kind, at),),
    )
    path = record_scenario(config, root).path
    result = score([to_record(a) for a in replay(path, builtin_rules())], [path])
    assert result.kinds[kind].labels == 1
    assert result.timely_recall == 1.0, result.table()
    assert result.precision == 1.0, result.table()


@pytest.mark.parametrize("at", [20.0, 400.0])
@pytest.mark.parametrize("kind", QUICK_KINDS)
def test_each_fault_is_detected_in_time_early_and_late(
    kind: str, at: float, tmp_path: Path
) -> None:
    _found_in_time(kind, at, 11, AFTER_S, tmp_path)


@pytest.mark.parametrize("seed", [11, 12, 13, 14, 15])
@pytest.mark.parametrize("at", [5.0, 10.0])
def test_a_loss_spike_in_the_first_seconds_is_detected(
    at: float, seed: int, tmp_path: Path
) -> None:
    # the loss still halves every few steps, and its noise is four times the later one
    _found_in_time("loss_spike", at, seed, 120.0, tmp_path)
