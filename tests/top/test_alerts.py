"""Which alerts are open, from the lifecycle events of each (newest transition wins)."""

from __future__ import annotations

from typing import Any

import pytest

from stepwatch.top._alerts import alerts_from_api, open_alerts_from_events


def event(ts: float, alert_id: str, state: str, node: str = "node0") -> dict[str, Any]:
    data = {"id": alert_id, "rule": f"rule-{alert_id}", "state": state, "since": ts}
    return {
        "ts": ts,
        "kind": "alert",
        "text": "",
        "labels": {"run": "r", "node": node},
        "data": data,
    }


@pytest.mark.parametrize(
    ("events", "open_ids"),
    [
        ([], []),
        ([event(1, "a", "firing")], ["a"]),
        ([event(1, "a", "firing"), event(2, "a", "resolved")], []),
        ([event(2, "a", "resolved"), event(1, "a", "firing")], []),  # by time, not by order
        ([event(1, "a", "firing"), event(2, "a", "resolved"), event(3, "a", "firing")], ["a"]),
        ([event(1, "a", "firing", "n0"), event(2, "a", "resolved", "n1")], ["a"]),  # entities
        (
            [event(1, "a", "pending"), event(2, "b", "firing"), event(3, "c", "inactive")],
            ["a", "b"],
        ),
    ],
)
def test_open_alerts_from_events(events: list[dict[str, Any]], open_ids: list[str]) -> None:
    assert [a.name for a in open_alerts_from_events(events)] == [f"rule-{i}" for i in open_ids]


def test_alerts_from_api_keep_open_ones_and_drop_the_run_label() -> None:
    body = [
        {"rule": "gpu_hot", "state": "firing", "since": 5.0, "labels": {"run": "r", "gpu": "1"}},
        {"rule": "old", "state": "resolved", "since": 1.0, "labels": {}},
    ]
    (row,) = alerts_from_api(body)
    assert (row.name, row.since, row.labels) == ("gpu_hot", 5.0, {"gpu": "1"})
