"""What becomes of alerts once they fire: silences and inhibition (what keeps one from people),
grouping, and the alerts file format."""

from ._alerts_io import AlertRecord, AlertsFormatError, read_alerts, write_alerts
from ._grouping import AlertGroup, group_alerts
from ._silence_book import SILENCE_EVENT, SILENCE_EXPIRED_EVENT, SilenceBook, SilenceEntry
from ._silences import (
    DEFAULT_INHIBITIONS,
    Inhibition,
    Matcher,
    RecentlyResolved,
    Silence,
    inhibited,
)

__all__ = [
    "AlertGroup",
    "AlertRecord",
    "AlertsFormatError",
    "DEFAULT_INHIBITIONS",
    "Inhibition",
    "Matcher",
    "RecentlyResolved",
    "SILENCE_EVENT",
    "SILENCE_EXPIRED_EVENT",
    "Silence",
    "SilenceBook",
    "SilenceEntry",
    "group_alerts",
    "inhibited",
    "read_alerts",
    "write_alerts",
]
