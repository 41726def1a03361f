"""The detectors a rule may name, by the ``type`` a rule file uses.

Thresholds and ``for`` durations are rule fields of their own, so only the
statistical detectors are listed here.
"""

from __future__ import annotations

from ._base import Detector
from ._detector_trend import Plateau, TrendSlope
from ._detectors import Cusum, NonFinite, RobustZ

__all__ = ["DETECTORS"]

DETECTORS: dict[str, type[Detector]] = {
    "nonfinite": NonFinite,
    "robust_z": RobustZ,
    "cusum": Cusum,
    "trend": TrendSlope,
    "plateau": Plateau,
}
