"""Finding what goes wrong in a training run: streaming detectors, the rule language, alert
lifecycle, silences and inhibition, and reading recorded runs for replay."""

from ..config import parse_duration
from ._absence import Absence, AbsenceFinding
from ._alerts_io import AlertRecord, AlertsFormatError, read_alerts, write_alerts
from ._base import Detector, Direction, Verdict, Warmup
from ._builtin import builtin_rules
from ._detector_iqr import IqrFence
from ._detector_trend import Plateau, Rise, TrendSlope, TrendVerdict
from ._detectors import MAD_SCALE, Cusum, HoldFor, NonFinite, RobustZ, Share, Threshold
from ._engine import LOG_REPEAT_S, Alert, Engine
from ._grouping import AlertGroup, group_alerts
from ._lifecycle import AlertState, Lifecycle, Transition
from ._live import LiveDetector, LiveStats, ReloadOutcome
from ._live_alert import ALERT_EVENT, LiveAlert, alert_id
from ._peers import PeerComparison, PeerVerdict
from ._recorded import Chunk, RecordingError, RecordingInfo, describe, read_recorded
from ._recovery import Recovery
from ._registry import DETECTORS
from ._replay import replay, to_record
from ._rule_files import RuleFiles
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
from ._scoring import (
    INCIDENT_GAP_S,
    WINDOW_AFTER_S,
    WINDOW_BEFORE_S,
    Incident,
    KindScore,
    Label,
    LabelOutcome,
    Scenario,
    Score,
    score,
)
from ._silence_book import SILENCE_EVENT, SILENCE_EXPIRED_EVENT, SilenceBook, SilenceEntry
from ._silences import DEFAULT_INHIBITIONS, Inhibition, Matcher, Silence, inhibited
from ._templates import check_template, render

__all__ = [
    "ALERT_EVENT",
    "DEFAULT_INHIBITIONS",
    "DETECTORS",
    "INCIDENT_GAP_S",
    "LOG_REPEAT_S",
    "MAD_SCALE",
    "SEVERITIES",
    "SILENCE_EVENT",
    "SILENCE_EXPIRED_EVENT",
    "WINDOW_AFTER_S",
    "WINDOW_BEFORE_S",
    "Absence",
    "AbsenceFinding",
    "Alert",
    "AlertGroup",
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
    "Incident",
    "Inhibition",
    "IqrFence",
    "KindScore",
    "Label",
    "LabelOutcome",
    "Lifecycle",
    "LiveAlert",
    "LiveDetector",
    "LiveStats",
    "LogMatch",
    "Matcher",
    "NonFinite",
    "PeerComparison",
    "PeerVerdict",
    "Plateau",
    "RecordingError",
    "RecordingInfo",
    "Recovery",
    "Rise",
    "ReloadOutcome",
    "RobustZ",
    "Rule",
    "RuleError",
    "RuleFiles",
    "RuleSet",
    "RuleTestResult",
    "Scenario",
    "Score",
    "Share",
    "Signal",
    "Silence",
    "SilenceBook",
    "SilenceEntry",
    "Threshold",
    "Transition",
    "TrendSlope",
    "TrendVerdict",
    "Verdict",
    "Warmup",
    "alert_id",
    "builtin_rules",
    "check_template",
    "describe",
    "group_alerts",
    "inhibited",
    "load_rules",
    "parse_duration",
    "parse_rules",
    "read_alerts",
    "read_recorded",
    "render",
    "replay",
    "run_rule_tests",
    "score",
    "to_record",
    "write_alerts",
]
