"""Real parts for the notification tests: alerts as the detector makes them, and a local HTTP
server (a thread on a free loopback port) that records what it is sent (``_recorder``)."""

from __future__ import annotations

from _recorder import WAIT_S, Recorder, recording_server

from stepwatch.detect import AlertState, LiveAlert, alert_id

__all__ = ["T0", "WAIT_S", "Recorder", "alert", "recording_server"]

T0 = 1_780_000_000.0


def alert(
    kind: str = "straggler",
    state: str = AlertState.FIRING,
    severity: str = "warning",
    since: float = T0,
    value: float = 1.8,
    baseline: float | None = None,
    **labels: str,
) -> LiveAlert:
    """One transition, the way the live detector hands it to subscribers."""
    labels = {"run": "r1", **labels}
    return LiveAlert(
        id=alert_id("builtin", kind, labels, since),
        group="builtin",
        rule=kind,
        kind=kind,
        state=state,
        severity=severity,
        since=since,
        ts=since + (60.0 if state != AlertState.FIRING else 0.0),
        value=value,
        labels=labels,
        annotations={"summary": f"{kind} at {value}", "description": f"why {kind} matters"},
        playbook=f"what to do about {kind}",
        baseline=baseline,
    )
