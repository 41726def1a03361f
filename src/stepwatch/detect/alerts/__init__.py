"""What becomes of alerts once they fire: silences and inhibition (what keeps one from people),
grouping, and the alerts file format."""

from ._alerts_io import AlertRecord, AlertsFormatError, read_alerts, write_alerts
from ._grouping import AlertGroup, group_alerts
from ._incidents import AlertIncident, Cause, incidents, root_kinds
from ._open_incidents import OpenIncidents
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
    "AlertIncident",
    "AlertRecord",
    "AlertsFormatError",
    "Cause",
    "DEFAULT_INHIBITIONS",
    "Inhibition",
    "Matcher",
    "OpenIncidents",
    "RecentlyResolved",
    "SILENCE_EVENT",
    "SILENCE_EXPIRED_EVENT",
    "Silence",
    "SilenceBook",
    "SilenceEntry",
    "group_alerts",
    "incidents",
    "inhibited",
    "read_alerts",
    "root_kinds",
    "write_alerts",
]
