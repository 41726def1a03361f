"""Alerts written as scenario JSON lines read back the same, rank and gpu as ints."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from stepwatch.detect.alerts._alerts_io import (
    AlertRecord,
    AlertsFormatError,
    read_alerts,
    write_alerts,
)

T0 = 1_780_003_700.0


def test_labels_are_normalised() -> None:
    a = AlertRecord.of(
        "gpu_thermal", T0, {"run": "r", "node": "node1", "gpu": "6", "rank": None, "pod": 3}
    )
    assert a.labels == {"run": "r", "node": "node1", "gpu": 6, "pod": "3"}
    b = AlertRecord.of("straggler", int(T0), {"run": "r", "rank": 12, "gpu": "", "node": ""})
    assert b.labels == {"run": "r", "rank": 12} and isinstance(b.ts, float)
    c = AlertRecord.of("x", T0, {"run": "r", "gpu": "mig-1"})
    assert c.labels["gpu"] == "mig-1"


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    alerts = [
        AlertRecord.of("nonfinite", T0, {"run": "r"}, severity="critical", value=math.nan),
        AlertRecord.of("gpu_thermal", T0 + 1, {"run": "r", "node": "node1", "gpu": "6"}),
        AlertRecord.of(
            "loss_spike", T0 + 2, {"run": "r"}, value=-math.inf, detail={"z": [1.5, math.inf]}
        ),
    ]
    path = tmp_path / "alerts.jsonl"
    assert write_alerts(path, alerts) == 3
    lines = [json.loads(s) for s in path.read_text().splitlines()]
    assert lines[1] == {
        "kind": "gpu_thermal",
        "ts": T0 + 1,
        "labels": {"run": "r", "node": "node1", "gpu": 6},
    }
    assert lines[0]["value"] == "nan" and lines[2]["detail"] == {"z": [1.5, "inf"]}
    back = list(read_alerts(path))
    assert [(a.kind, a.ts, a.labels) for a in back] == [(a.kind, a.ts, a.labels) for a in alerts]
    assert back[0].extra == {"severity": "critical", "value": "nan"}


def test_write_to_an_open_stream_appends() -> None:
    out = io.StringIO()
    out.write("")
    a = AlertRecord.of("node_down", T0, {"run": "r", "node": "node3"})
    assert write_alerts(out, [a]) == 1
    assert write_alerts(out, (a for _ in range(2))) == 2
    assert len(out.getvalue().splitlines()) == 3


@pytest.mark.parametrize(
    ("kind", "ts", "labels", "extra", "why"),
    [
        ("", T0, {"run": "r"}, {}, "kind must be"),
        ("k", math.nan, {"run": "r"}, {}, "finite number"),
        ("k", "1", {"run": "r"}, {}, "finite number"),
        ("k", True, {"run": "r"}, {}, "finite number"),
        ("k", T0, {"node": "n"}, {}, "need a run"),
        ("k", T0, {"run": ""}, {}, "need a run"),
        ("k", T0, {"run": "r", "gpu": 1.5}, {}, "'gpu' must be a str or int"),
    ],
)
def test_bad_alerts_are_refused(
    kind: str, ts: Any, labels: dict[str, Any], extra: dict[str, Any], why: str
) -> None:
    with pytest.raises(AlertsFormatError, match=why):
        AlertRecord.of(kind, ts, labels, **extra)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{oops", "not JSON"),
        ("[1, 2]", "needs kind, ts and labels"),
        (json.dumps({"kind": "k", "ts": T0}), "needs kind, ts and labels"),
        (json.dumps({"kind": "k", "ts": T0, "labels": ["run"]}), "labels must be an object"),
        (json.dumps({"kind": "k", "ts": T0, "labels": {"node": "n"}}), "need a run"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / "alerts.jsonl"
    good = json.dumps({"kind": "k", "ts": T0, "labels": {"run": "r"}})
    path.write_text(f"{good}\n\n{line}\n")
    got = read_alerts(path)
    assert next(got).kind == "k"
    with pytest.raises(AlertsFormatError, match=f"alerts.jsonl:3: .*{why}"):
        next(got)
