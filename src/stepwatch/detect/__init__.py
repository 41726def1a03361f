"""Finding what goes wrong in a training run: streaming detectors, the rule language, alert
lifecycle, silences and inhibition, and reading recorded runs for replay."""

from ._absence import Absence, AbsenceFinding
from ._alerts_io import AlertRecord, AlertsFormatError, read_alerts, write_alerts
from ._base import Detector, Direction, Verdict
from ._detector_trend import Plateau, TrendSlope, TrendVerdict
from ._detectors import MAD_SCALE, Cusum, HoldFor, NonFinite, RobustZ, Threshold
from ._engine import LOG_REPEAT_S, Alert, Engine
from ._lifecycle import AlertState, Lifecycle, Transition
from ._peers import PeerComparison, PeerVerdict
from ._recorded import Chunk, RecordingError, RecordingInfo, describe, read_recorded
from ._registry import DETECTORS
from ._replay import builtin_rules, replay, to_record
from ._rule_tests import RuleTestResult, run_rule_tests
from ._rules import (
    SEVERITIES,
    Comparison,
    LogMatch,
    Rule,
    RuleError,
    RuleSet,
    Signal,
    load_rules,
    parse_rules,
)
from ._silences import DEFAULT_INHIBITIONS, Inhibition, Matcher, Silence, inhibited
from ._templates import check_template, render

__all__ = [
    "DEFAULT_INHIBITIONS",
    "DETECTORS",
    "LOG_REPEAT_S",
    "MAD_SCALE",
    "SEVERITIES",
    "Absence",
    "AbsenceFinding",
    "Alert",
    "AlertRecord",
    "AlertState",
    "AlertsFormatError",
    "Chunk",
    "Comparison",
    "Cusum",
    "Detector",
    "Direction",
    "Engine",
    "HoldFor",
    "Inhibition",
    "Lifecycle",
    "LogMatch",
    "Matcher",
    "NonFinite",
    "PeerComparison",
    "PeerVerdict",
    "Plateau",
    "RecordingError",
    "RecordingInfo",
    "RobustZ",
    "Rule",
    "RuleError",
    "RuleSet",
    "RuleTestResult",
    "Signal",
    "Silence",
    "Threshold",
    "Transition",
    "TrendSlope",
    "TrendVerdict",
    "Verdict",
    "builtin_rules",
    "check_template",
    "describe",
    "inhibited",
    "load_rules",
    "parse_rules",
    "read_alerts",
    "read_recorded",
    "render",
    "replay",
    "run_rule_tests",
    "to_record",
    "write_alerts",
]
