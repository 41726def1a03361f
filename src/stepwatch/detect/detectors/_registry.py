"""The detectors a rule may name, by the ``type`` a rule file uses.

Thresholds and ``for`` durations are rule fields of their own, so only the
statistical detectors are listed here; ``peers`` and ``absence`` compare the
series of a rule with each other (members named by the rule's ``by``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._absence import Absence
from ._detector_iqr import IqrFence
from ._detector_trend import Plateau, Rise, TrendSlope
from ._detectors import Cusum, NonFinite, RobustZ, Share
from ._peers import PeerComparison

__all__ = ["DETECTORS"]

DETECTORS: dict[str, Callable[..., Any]] = {
    "nonfinite": NonFinite,
    "robust_z": RobustZ,
    "iqr": IqrFence,
    "cusum": Cusum,
    "trend": TrendSlope,
    "plateau": Plateau,
    "rise": Rise,
    "share": Share,
    "peers": PeerComparison,
    "absence": Absence,
}
