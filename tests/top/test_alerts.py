"""Rows of top's alerts panel from the alerts API's answer."""

from __future__ import annotations

from stepwatch.top._alerts import alerts_from_api


def test_alerts_from_api_drop_the_run_label_and_what_is_no_alert() -> None:
    body = [
        {"rule": "gpu_hot", "state": "firing", "since": 5.0, "labels": {"run": "r", "gpu": "1"}},
        "not an alert",
    ]
    (row,) = alerts_from_api(body)
    assert (row.name, row.since, row.labels) == ("gpu_hot", 5.0, {"gpu": "1"})
