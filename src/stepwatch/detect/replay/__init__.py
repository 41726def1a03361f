"""Running rules away from the collector: replay over recorded runs, rule unit tests, and scoring
alerts against labelled scenarios. The live path never imports it."""

from ._recorded import Chunk, RecordingError, RecordingInfo, describe, read_recorded
from ._replay import replay, to_record
from ._rule_tests import RuleTestResult, run_rule_tests
from ._scoring import (
    INCIDENT_GAP_S,
    PRECURSORS,
    WINDOW_AFTER_S,
    WINDOW_BEFORE_S,
    Incident,
    KindScore,
    Label,
    LabelOutcome,
    Precursor,
    Scenario,
    Score,
    score,
)

__all__ = [
    "Chunk",
    "INCIDENT_GAP_S",
    "Incident",
    "KindScore",
    "Label",
    "LabelOutcome",
    "PRECURSORS",
    "Precursor",
    "RecordingError",
    "RecordingInfo",
    "RuleTestResult",
    "Scenario",
    "Score",
    "WINDOW_AFTER_S",
    "WINDOW_BEFORE_S",
    "describe",
    "read_recorded",
    "replay",
    "run_rule_tests",
    "score",
    "to_record",
]
