"""Alert lifecycle in data time: pending → firing → resolved, one alert per rule and entity.

As in Prometheus: a condition must hold ``for`` seconds, or for a number of
consecutive samples, or for whichever of the two comes first, before the alert
fires, and with ``keep_firing_for`` a firing alert outlives a brief lapse of
its condition. Work is per run of equal conditions in a batch, not per sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..rules import Rule

__all__ = ["AlertState", "Lifecycle", "Transition"]


class AlertState:
    """The states an alert passes through (strings, for JSON and the store)."""

    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Transition:
    """An alert entered ``state`` at data time ``ts``; ``since`` is when its condition began;
    ``baseline`` is what the value was judged against (None when the rule has none);
    ``predicted_ts`` when a forecast says its target will be reached (None without one)."""

    state: str
    ts: float
    since: float
    value: float
    baseline: float | None = None
    predicted_ts: float | None = None


@dataclass(slots=True)
class Lifecycle:
    """The state of one rule's alert for one entity; O(1), round-trips through ``state_dict``."""

    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    for_samples: int = 0
    state: str | None = None  # None: inactive
    since: float = 0.0  # when the condition began
    held: int = 0  # consecutive samples the condition has held
    last_true: float = 0.0  # the last time the condition held
    value: float = float("nan")  # the value at the last time the condition held
    baseline: float = float("nan")  # and what it was judged against
    predicted: float = float("nan")  # and when its forecast said the target would be reached
    _out: list[Transition] = field(default_factory=list, repr=False)

    @classmethod
    def of(cls, rule: Rule) -> Lifecycle:
        """A fresh lifecycle with the rule's ``for`` and ``keep_firing_for``."""
        return cls(rule.for_s, rule.keep_firing_for_s, rule.for_samples)

    def update(
        self,
        ts: np.ndarray,
        active: np.ndarray,
        value: np.ndarray,
        baseline: np.ndarray | None = None,
        predicted: np.ndarray | None = None,
    ) -> list[Transition]:
        """Feed one batch (ts ascending) of conditions and values (and what each value was
        judged against, and when a forecast expects its target); return the transitions."""
        self._out = []
        if ts.shape[0] == 0:
            return []
        if self.state is None and not active.any():  # the common case: nothing to watch
            self.held = 0
            return []
        changes = np.flatnonzero(active[1:] != active[:-1]) + 1
        starts = np.concatenate(([0], changes))
        ends = np.concatenate((changes, [ts.shape[0]]))
        if baseline is None:
            baseline = np.full(ts.shape[0], np.nan)
        if predicted is None:
            predicted = np.full(ts.shape[0], np.nan)
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            if active[start]:
                part = slice(start, end)
                self._held(ts[part], value[part], baseline[part], predicted[part])
            else:
                self._lapsed(float(ts[start]), float(ts[end - 1]))
        return self._out

    def _held(
        self, ts: np.ndarray, value: np.ndarray, baseline: np.ndarray, predicted: np.ndarray
    ) -> None:
        first = float(ts[0])
        if self.state is None or self.state == AlertState.RESOLVED:
            self.held = 0
            self.baseline, self.predicted = float(baseline[0]), float(predicted[0])
            self._enter(AlertState.PENDING, first, first, float(value[0]))
        counted = self.held + np.arange(1, ts.shape[0] + 1)
        self.held += ts.shape[0]
        if self.state == AlertState.PENDING:
            due = np.flatnonzero(self._due(ts, counted))
            if due.size:
                i = int(due[0])
                self.baseline, self.predicted = float(baseline[i]), float(predicted[i])
                self._enter(AlertState.FIRING, float(ts[i]), self.since, float(value[i]))
        self.last_true, self.value = float(ts[-1]), float(value[-1])
        self.baseline, self.predicted = float(baseline[-1]), float(predicted[-1])

    def _due(self, ts: np.ndarray, counted: np.ndarray) -> np.ndarray:
        """Where the condition has held long enough: by time, by count, or by either when both
        are given (a step-paced signal is then held neither for hours nor for thousands of
        steps); with neither, at once."""
        timed = ts >= self.since + self.for_s
        if self.for_samples == 0:
            return timed
        enough = counted >= self.for_samples
        return enough | timed if self.for_s > 0 else enough

    def _lapsed(self, first: float, last: float) -> None:
        self.held = 0
        if self.state == AlertState.PENDING:
            self.state = None  # never fired: nothing to resolve
        elif self.state == AlertState.FIRING:
            resolve_at = max(first, self.last_true + self.keep_firing_for_s)
            if resolve_at <= last:
                self._enter(AlertState.RESOLVED, resolve_at, self.since, self.value)

    def _enter(self, state: str, ts: float, since: float, value: float) -> None:
        """Enter ``state``, with the baseline and forecast last recorded (NaN, or a target
        never reached: none)."""
        self.state, self.since = state, since
        baseline = None if math.isnan(self.baseline) else self.baseline
        predicted = self.predicted if math.isfinite(self.predicted) else None
        self._out.append(Transition(state, ts, since, value, baseline, predicted))

    def state_dict(self) -> dict[str, object]:
        return {
            "state": self.state,
            "since": self.since,
            "held": self.held,
            "last_true": self.last_true,
            "value": self.value,
            "baseline": self.baseline,
            "predicted": self.predicted,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.state = state["state"]  # type: ignore[assignment]
        self.since = float(state["since"])  # type: ignore[arg-type]
        self.held = int(state["held"])  # type: ignore[call-overload]
        self.last_true = float(state["last_true"])  # type: ignore[arg-type]
        self.value = float(state["value"])  # type: ignore[arg-type]
        self.baseline = float(state["baseline"])  # type: ignore[arg-type]
        self.predicted = float(state.get("predicted", math.nan))  # type: ignore[arg-type]
