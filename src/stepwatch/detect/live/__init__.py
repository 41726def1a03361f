"""Detection inside the collector: the engines over committed batches, the alerts open now and
their subscribers, checkpoints, and picking up after a restart."""

from ._live import LiveDetector, LiveStats, ReloadOutcome
from ._live_alert import ALERT_EVENT, LiveAlert, alert_id
from ._recovery import Recovery

__all__ = [
    "ALERT_EVENT",
    "LiveAlert",
    "LiveDetector",
    "LiveStats",
    "Recovery",
    "ReloadOutcome",
    "alert_id",
]
