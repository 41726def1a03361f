"""A forecast's predicted time goes with its alert through the collector's form of it: the
store's event and back, and the API's fields."""

from __future__ import annotations

from stepwatch.detect import Alert, LiveAlert, builtin_rules


def _forecast(predicted_ts: float | None) -> Alert:
    rule = next(r for r in builtin_rules().rules if r.alert == "forecast_oom")
    labels = {"run": "r", "node": "node1", "gpu": "3"}
    return Alert(rule, "firing", 100.0, 40.0, 0.82, labels, {"summary": "s"}, 0.8, predicted_ts)


def test_the_predicted_time_survives_the_store_and_is_shown() -> None:
    live = LiveAlert.of(_forecast(820.0))
    assert live.predicted_ts == 820.0 and live.as_json()["predicted_ts"] == 820.0
    assert LiveAlert.from_event(live.to_event()) == live
    plain = LiveAlert.of(_forecast(None))
    assert LiveAlert.from_event(plain.to_event()).predicted_ts is None
