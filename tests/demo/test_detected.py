"""Every fault the demo injects is found by the built-in pack in time, wherever it falls: in the
first minute (while the loss still falls steeply and detectors warm up) as well as later."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepwatch.demo import FAULT_KINDS, DemoConfig, Fault, record_scenario
from stepwatch.detect import builtin_rules, replay, score, to_record

#: Simulated seconds after the fault begins: the slowest kind (heat) is due 450 s after it.
AFTER_S = 480.0


@pytest.mark.parametrize("at", [20.0, 400.0])
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_fault_is_detected_in_time_early_and_late(
    kind: str, at: float, tmp_path: Path
) -> None:
    config = DemoConfig(
        nodes=2,
        gpus_per_node=2,
        seed=11,
        duration_s=at + AFTER_S,
        faults=(Fault(kind, at),),
    )
    path = record_scenario(config, tmp_path).path
    result = score([to_record(a) for a in replay(path, builtin_rules())], [path])
    assert result.kinds[kind].labels == 1
    assert result.timely_recall == 1.0, result.table()
