"""Streaming detectors: each judges one series (or the members of a run) batch by batch,
with state that round-trips, and the registry of the types a rule file may name."""

from ._absence import PRODUCER, Absence, AbsenceFinding, producer
from ._base import Detector, Direction, Verdict, Warmup
from ._detector_iqr import IqrFence
from ._detector_trend import Plateau, Rise, TrendSlope, TrendVerdict
from ._detectors import MAD_SCALE, Cusum, HoldFor, NonFinite, RobustZ, Share, Threshold
from ._peers import PeerComparison, PeerVerdict
from ._registry import DETECTORS

__all__ = [
    "Absence",
    "AbsenceFinding",
    "Cusum",
    "DETECTORS",
    "Detector",
    "Direction",
    "HoldFor",
    "IqrFence",
    "MAD_SCALE",
    "NonFinite",
    "PRODUCER",
    "PeerComparison",
    "PeerVerdict",
    "Plateau",
    "Rise",
    "RobustZ",
    "Share",
    "Threshold",
    "TrendSlope",
    "TrendVerdict",
    "Verdict",
    "Warmup",
    "producer",
]
